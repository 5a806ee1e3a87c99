package feed

import (
	"bytes"
	"encoding/binary"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"unicode/utf16"
)

// The fixtures below hold bytes an editor would mangle (byte order marks,
// UTF-16, invalid UTF-8, NUL), so they are written by this code and committed;
// TestGeneratedFixtures keeps the committed files and the code in step.
// Regenerate with: go test ./feed -run TestGeneratedFixtures -update
var update = flag.Bool("update", false, "rewrite the generated fixtures in testdata")

// unicodeFeed has non-ASCII text, including a character outside the BMP, so
// the UTF-16 fixtures exercise surrogate pairs.
const unicodeFeed = "store;ean;article_number;quantity;price;product_name;article_color\r\n" +
	"S1;4006381333931;SKU-1;5;19.99;Größe 🙂 Schuh;Grün\r\n" +
	"S2;5901234123457;SKU-2;1;2.00;\"Zwei\r\nZeilen\";\r\n"

var generatedFixtures = map[string]func() []byte{
	"ok_bom_utf8.csv": func() []byte { return append([]byte{0xEF, 0xBB, 0xBF}, unicodeFeed...) },
	"ok_utf16le.csv":  func() []byte { return encodeUTF16(unicodeFeed, binary.LittleEndian, true) },
	"ok_utf16be.csv":  func() []byte { return encodeUTF16(unicodeFeed, binary.BigEndian, true) },
	"err_only_bom.csv": func() []byte {
		return []byte{0xEF, 0xBB, 0xBF}
	},
	// Latin-1 "ü" (0xFC) on line 3: the usual export mistake.
	"err_invalid_utf8.csv": func() []byte {
		return []byte("store;ean;article_number;quantity;price;product_name\n" +
			"S1;4006381333931;SKU-1;1;1.00;ok\n" +
			"S1;5901234123457;SKU-2;1;1.00;Gr\xFCn\n")
	},
	"err_nul.csv": func() []byte {
		return []byte("store;ean;article_number;quantity;price\n" +
			"S1;4006381333931;SKU-1;1;1.00\x00\n")
	},
	// UTF-16 without a byte order mark reads as UTF-8 full of NUL bytes.
	"err_utf16_no_bom.csv": func() []byte {
		return encodeUTF16("store;ean;article_number;quantity;price\n", binary.LittleEndian, false)
	},
	// A lone high surrogate (0xD83D) on line 3.
	"err_utf16_surrogate.csv": func() []byte {
		b := encodeUTF16("store;ean;article_number;quantity;price;product_name\n"+
			"S1;4006381333931;SKU-1;1;1.00;ok\nS1;5901234123457;SKU-2;1;1.00;", binary.LittleEndian, true)
		b = binary.LittleEndian.AppendUint16(b, 0xD83D)
		return append(b, encodeUTF16("x\n", binary.LittleEndian, false)...)
	},
	"err_utf16_odd.csv": func() []byte {
		b := encodeUTF16("store;ean;article_number;quantity;price\nS1;4006381333931;SKU-1;1;1.00\n",
			binary.BigEndian, true)
		return append(b, 'S')
	},
}

func encodeUTF16(s string, order binary.AppendByteOrder, bom bool) []byte {
	var b []byte
	if bom {
		b = order.AppendUint16(b, 0xFEFF)
	}
	for _, u := range utf16.Encode([]rune(s)) {
		b = order.AppendUint16(b, u)
	}
	return b
}

func TestGeneratedFixtures(t *testing.T) {
	for name, gen := range generatedFixtures {
		path := filepath.Join("testdata", name)
		want := gen()
		if *update {
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run with -update to write it)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from its generator; run with -update", path)
		}
	}
}
