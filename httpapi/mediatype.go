package httpapi

import (
	"mime"
	"net/http"
	"strings"

	"storelink"
)

// jsonType is the media type of the JSON bodies the API takes and gives.
const jsonType = "application/json"

// checkJSONType refuses a request body that says it is not JSON (RFC 9110
// section 15.5.16): every body the API reads as JSON must be sent as
// application/json, with any parameters (a charset other than UTF-8
// contradicts JSON, which is UTF-8), or as a type of the +json suffix
// (RFC 6839) such as application/merge-patch+json. A request without a
// body (Content-Length 0) has no type to check. The answer's Accept names
// the type, as RFC 9110 section 12.5.1 has it; a PATCH's Accept-Patch
// too (RFC 5789).
func checkJSONType(w http.ResponseWriter, r *http.Request) error {
	if r.ContentLength == 0 {
		return nil
	}
	ct := r.Header.Get("Content-Type")
	err := jsonTypeProblem(ct)
	if err != nil {
		w.Header().Set("Accept", jsonType)
		if r.Method == http.MethodPatch {
			w.Header().Set("Accept-Patch", jsonType)
		}
	}
	return err
}

// jsonTypeProblem says what is wrong with ct as the type of a JSON body,
// or nil.
func jsonTypeProblem(ct string) error {
	if strings.TrimSpace(ct) == "" {
		return storelink.Errorf(storelink.EUNSUPPORTED, "The body has no Content-Type; send it as Content-Type: %s.", jsonType)
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil {
		return storelink.Errorf(storelink.EUNSUPPORTED, "Content-Type %s is not a media type; send the body as Content-Type: %s.", quoteShort(ct), jsonType)
	}
	if mt != jsonType && !(strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")) {
		return storelink.Errorf(storelink.EUNSUPPORTED, "Content-Type is %s; this call takes a JSON body, sent as Content-Type: %s.", quoteShort(mt), jsonType)
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return storelink.Errorf(storelink.EUNSUPPORTED, "Content-Type says charset=%s; JSON is UTF-8: send charset=utf-8 or no charset.", quoteShort(cs))
	}
	return nil
}
