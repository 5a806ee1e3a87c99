package feed

import (
	"strings"
	"testing"
	"unicode/utf8"

	"storelink"
)

// TestProblemValue checks that each problem line caused by one field's
// value shows that value, cut to its first 50 runes, and that a problem of
// no one value shows none.
func TestProblemValue(t *testing.T) {
	long := strings.Repeat("é", 49) + "€xyz" // 53 runes; the 50th is €
	csv := "store,ean,article_number,quantity,price,retail_price,product_name\n" +
		"S9,4006381333931,A-1,1,1.00,,\n" + // unknown store
		"S1,4006381333932,A-2,1,1.00,,\n" + // bad check digit
		"S1,4006381333931,A-3,many,1.00,,\n" + // bad quantity
		"S1,5901234123457,A-4,1,2.00,1.50,\n" + // retail below price
		"S1,96385074,A-5,1,,,\n" + // missing price
		"S1,036000291452,A-6,1,1.00,,<b>" + long + "\n" + // fine: text within bounds
		"S1,10012345678902," + strings.Repeat("x", 70) + ",1,1.00,,\n" + // article number too long
		"S1,4006381333931,A-8\n" // wrong number of fields
	rep, err := Check(strings.NewReader(csv), testStores, func(storelink.StockRow) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	got := map[int]string{}
	for _, p := range rep.Errors {
		for _, ref := range p.LineNumbers {
			got[ref.LineNumber] = ref.Value
		}
	}
	want := map[int]string{
		2: "S9",
		3: "4006381333932",
		4: "many",
		5: "1.50",
		6: "",
		8: strings.Repeat("x", 50),
		9: "",
	}
	for line, v := range want {
		if g, ok := got[line]; !ok || g != v {
			t.Errorf("line %d: value %q (listed %v), want %q", line, g, ok, v)
		}
	}
	if _, ok := got[7]; ok {
		t.Errorf("line 7 has no problem but is listed with %q", got[7])
	}
	if rep.RowsRejected != 7 {
		t.Errorf("RowsRejected = %d, want 7", rep.RowsRejected)
	}

	// A value of many-byte runes is cut on a rune boundary after 50 runes.
	csv = "store,ean,article_number,quantity,price\nS1,4006381333931,A-1," + long + ",1.00\n"
	rep, err = Check(strings.NewReader(csv), testStores, func(storelink.StockRow) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Errors) != 1 || len(rep.Errors[0].LineNumbers) != 1 {
		t.Fatalf("errors = %+v, want one line with a bad quantity", rep.Errors)
	}
	v := rep.Errors[0].LineNumbers[0].Value
	if want := strings.Repeat("é", 49) + "€"; v != want || !utf8.ValidString(v) || utf8.RuneCountInString(v) != storelink.MaxRefValue {
		t.Errorf("value = %q, want %q (50 runes)", v, want)
	}
}
