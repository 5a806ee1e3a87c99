package storelink

import _ "embed"

// OpenAPI is the API description served at /openapi.yaml; the file in the
// repository is the one source, and a test keeps it and the routes in step.
//
//go:embed openapi.yaml
var OpenAPI []byte
