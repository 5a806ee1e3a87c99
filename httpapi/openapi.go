package httpapi

import _ "embed"

// openAPISpec is the API description served at /openapi.yaml. The file
// lives beside the handlers because go:embed reaches no parent folder; the
// repository's root openapi.yaml is a link to it, so there is one source,
// and a test keeps it and the routes in step.
//
//go:embed openapi.yaml
var openAPISpec []byte
