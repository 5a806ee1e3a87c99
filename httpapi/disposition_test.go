package httpapi_test

import (
	"mime"
	"strings"
	"testing"

	"storelink/httpapi"
)

// A download's name is given in ASCII in filename, and whole in filename*
// (UTF-8, RFC 8187) when it is not ASCII; Go's own parser, as a browser,
// reads the whole name back.
func TestAttachment(t *testing.T) {
	for _, c := range []struct{ name, want string }{
		{"stock.csv", `attachment; filename=stock.csv`},
		{"my stock.csv", `attachment; filename="my stock.csv"`},
		{`a"b.csv`, `attachment; filename="a\"b.csv"`},
		{"Bestand Köln.csv", `attachment; filename="Bestand Koln.csv"; filename*=UTF-8''Bestand%20K%C3%B6ln.csv`},
		{"Größe-ÆØ.csv", `attachment; filename=Gro_e-__.csv; filename*=UTF-8''Gr%C3%B6%C3%9Fe-%C3%86%C3%98.csv`},
		{"库存.csv", `attachment; filename=__.csv; filename*=UTF-8''%E5%BA%93%E5%AD%98.csv`},
		{"naïve{1}.csv", `attachment; filename=naive{1}.csv; filename*=UTF-8''na%C3%AFve%7B1%7D.csv`},
	} {
		got := httpapi.Attachment(c.name)
		if got != c.want {
			t.Errorf("Attachment(%q) = %s, want %s", c.name, got, c.want)
		}
		if _, params, err := mime.ParseMediaType(got); err != nil || params["filename"] != c.name {
			t.Errorf("Attachment(%q) = %s, read back as %q (%v)", c.name, got, params["filename"], err)
		}
	}
}

// The files of an upload named in UTF-8 download under ASCII names with
// the whole name beside, the error file named after the file.
func TestDownloadNames(t *testing.T) {
	t.Parallel()
	a := newAPI(t, apiOptions{})
	var up struct {
		UploadID string `json:"upload_id"`
	}
	_, b := a.upload("Bestand Köln.csv", []byte(feed), nil)
	decodeInto(t, b, &up)
	a.waitUpload(up.UploadID)
	u := "/stock/" + a.ClientID + "/uploads/" + up.UploadID
	for path, want := range map[string]string{
		u + "/file":       `attachment; filename="Bestand Koln.csv"; filename*=UTF-8''Bestand%20K%C3%B6ln.csv`,
		u + "/errors.csv": `attachment; filename="Bestand Koln-errors.csv"; filename*=UTF-8''Bestand%20K%C3%B6ln-errors.csv`,
	} {
		resp, b := a.do("GET", path, nil, map[string]string{"x-api-key": a.APIKey})
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s = %d %s", path, resp.StatusCode, b)
		}
		if got := resp.Header.Get("Content-Disposition"); got != want {
			t.Errorf("GET %s: Content-Disposition %s, want %s", path, got, want)
		}
	}
	_, b = a.upload("stock.csv", []byte(feed), nil)
	decodeInto(t, b, &up)
	a.waitUpload(up.UploadID)
	resp, _ := a.do("GET", "/stock/"+a.ClientID+"/uploads/"+up.UploadID+"/errors.csv", nil, map[string]string{"x-api-key": a.APIKey})
	if got := resp.Header.Get("Content-Disposition"); !strings.HasSuffix(got, "filename=stock-errors.csv") {
		t.Errorf("error file of stock.csv: Content-Disposition %s, want filename=stock-errors.csv", got)
	}
}
