package storelink_test

import (
	"strings"
	"testing"

	"storelink"
)

func TestTextProblem(t *testing.T) {
	tests := []struct {
		s, want string // want: part of the problem; "" for none
	}{
		{"", ""},
		{"Acme GmbH", ""},
		{"Jürgen 🙂 \t tab", ""},
		{"\u00a0no-break space", ""}, // U+00A0 is the first after C1
		{"a\x00b", "control character U+0000 at character 2"},
		{"ab\n", "control character U+000A at character 3"},
		{"\x7f", "control character U+007F at character 1"},
		{"é\u0085", "control character U+0085 at character 2"},
		{"\u009f", "U+009F"},
		{"ü\xff", "not valid UTF-8 (byte 0xff at character 2)"},
		{"a\xc3", "not valid UTF-8"},
		{"\xed\xa0\x80", "not valid UTF-8"}, // an encoded surrogate
	}
	for _, tt := range tests {
		got := storelink.TextProblem(tt.s)
		if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
			t.Errorf("TextProblem(%q) = %q, want %q", tt.s, got, tt.want)
		}
	}
}

// TestNameProblem: a name, store id or file name may hold any letter,
// mark, symbol or space a person types (tab as TextProblem allows), but no
// invisible format character; the problem names the code point, its name
// when it has a common one, and where it is.
func TestNameProblem(t *testing.T) {
	tests := []struct {
		s, want string // want: the problem, or a part of it; "" for none
	}{
		{"Acme GmbH", ""},
		{"Jürgen Müller & Söhne \t tab", ""},
		{"\u00a0no-break space, \u00ac not sign, \u00ae", ""}, // U+00AC and U+00AE sit either side of the soft hyphen
		{"👍🏽 🇩🇪 ❤️", ""},                                      // a skin tone, a flag and a variation selector are not format characters
		{"محمد", ""},
		{"東京店", ""},
		{"Acme\u202eHbmG", "contains U+202E (RIGHT-TO-LEFT OVERRIDE) at character 5, an invisible format character"},
		{"\u202aa", "U+202A (LEFT-TO-RIGHT EMBEDDING) at character 1"},
		{"a\u202d", "U+202D (LEFT-TO-RIGHT OVERRIDE) at character 2"},
		{"ab\u2066c\u2069", "U+2066 (LEFT-TO-RIGHT ISOLATE) at character 3"},
		{"\u2067", "U+2067 (RIGHT-TO-LEFT ISOLATE)"},
		{"\u2068", "U+2068 (FIRST STRONG ISOLATE)"},
		{"\u2069", "U+2069 (POP DIRECTIONAL ISOLATE)"},
		{"S\u200b1", "U+200B (ZERO WIDTH SPACE) at character 2"},
		{"\u200c", "U+200C (ZERO WIDTH NON-JOINER)"},
		{"\u200d", "U+200D (ZERO WIDTH JOINER)"},
		{"\u200e", "U+200E (LEFT-TO-RIGHT MARK)"},
		{"\u200f", "U+200F (RIGHT-TO-LEFT MARK)"},
		{"ü\u00ad", "U+00AD (SOFT HYPHEN) at character 2"},
		{"\u061c", "U+061C (ARABIC LETTER MARK)"},
		{"\u2060", "U+2060 (WORD JOINER)"},
		{"\ufeffname", "U+FEFF (ZERO WIDTH NO-BREAK SPACE) at character 1"},
		{"a\u2028b", "U+2028 (LINE SEPARATOR)"},
		{"a\u2029b", "U+2029 (PARAGRAPH SEPARATOR)"},
		{"\U000e0041", "contains U+E0041 at character 1, an invisible format character"}, // a tag letter
		{"\u0600", "U+0600 at character 1"},                                              // Arabic number sign, also Cf
		{"a\x00b", "control character U+0000"},                                           // TextProblem first
		{"a\xff", "not valid UTF-8"},
	}
	for _, tt := range tests {
		got := storelink.NameProblem(tt.s)
		if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
			t.Errorf("NameProblem(%q) = %q, want %q", tt.s, got, tt.want)
		}
	}
	err := storelink.CheckName("name", "Acme\u202eHbmG")
	if storelink.ErrorCode(err) != storelink.EUNPROCESSABLE ||
		storelink.ErrorMessage(err) != "name contains U+202E (RIGHT-TO-LEFT OVERRIDE) at character 5, an invisible format character." {
		t.Errorf("CheckName = %v, want EUNPROCESSABLE naming the field and the character", err)
	}
}

// TestValidateStoreID: a store id holds no control character, '/' or
// invisible format character, and the error says which.
func TestValidateStoreID(t *testing.T) {
	for id, want := range map[string]string{
		"S1": "", "Filiale Köln-Süd": "", "店-1": "",
		"":               "1 to 64 characters",
		" S1":            "must not start or end with spaces",
		"S/1":            "must not contain control characters or '/'",
		"S\x85":          "not valid UTF-8",
		"S\u00851":       "must not contain control characters",
		"S\u200b1":       "store_id contains U+200B (ZERO WIDTH SPACE) at character 2, an invisible format character.",
		"\u202eS1":       "store_id contains U+202E (RIGHT-TO-LEFT OVERRIDE) at character 1",
		"S1\ufeff":       "U+FEFF",
		"S\u00ad1":       "U+00AD (SOFT HYPHEN)",
		"S\u20661\u2069": "U+2066 (LEFT-TO-RIGHT ISOLATE)",
	} {
		err := storelink.ValidateStoreID(id)
		switch {
		case want == "" && err != nil:
			t.Errorf("ValidateStoreID(%q) = %v, want nil", id, err)
		case want != "" && (storelink.ErrorCode(err) != storelink.EINVALID || !strings.Contains(storelink.ErrorMessage(err), want)):
			t.Errorf("ValidateStoreID(%q) = %v, want EINVALID saying %q", id, err, want)
		}
	}
}

// TestNewOrderValidateText: a control character in any text of an order
// is refused with 422, naming the field; a tab is not.
func TestNewOrderValidateText(t *testing.T) {
	valid := func() storelink.NewOrder {
		return storelink.NewOrder{OrderNumber: "A-1", ClientID: "c", Items: []storelink.NewItem{{EAN: eanPen, MarketplaceArticleNumber: "M"}},
			CustomerBillingAddress: &storelink.Address{FirstName: "A", LastName: "B", AddressLine1: "C", ZipCode: "1", City: "D", CountryCode: "DE"},
			DeliveryDetails:        &storelink.DeliveryDetails{DeliveryCarrierName: "DHL"}}
	}
	tests := []struct {
		field  string
		change func(n *storelink.NewOrder)
	}{
		{"order_number", func(n *storelink.NewOrder) { n.OrderNumber = "A\x01-1" }},
		{"client_id", func(n *storelink.NewOrder) { n.ClientID = "c\x00" }},
		{"store_id", func(n *storelink.NewOrder) { n.StoreID = "S\xff" }},
		{"items[0].marketplace_article_number", func(n *storelink.NewOrder) { n.Items[0].MarketplaceArticleNumber = "M\n" }},
		{"items[0].article_number", func(n *storelink.NewOrder) { n.Items[0].ArticleNumber = "SKU\u0085" }},
		{"customer_billing_address.last_name", func(n *storelink.NewOrder) { n.CustomerBillingAddress.LastName = "B\x1b" }},
		{"customer_billing_address.address_line_2", func(n *storelink.NewOrder) { n.CustomerBillingAddress.AddressLine2 = "\r" }},
		{"delivery_details.delivery_carrier_name", func(n *storelink.NewOrder) { n.DeliveryDetails.DeliveryCarrierName = "DHL\x7f" }},
	}
	for _, tt := range tests {
		n := valid()
		tt.change(&n)
		err := n.Validate()
		if storelink.ErrorCode(err) != storelink.EUNPROCESSABLE || !strings.HasPrefix(storelink.ErrorMessage(err), tt.field+" ") {
			t.Errorf("%s: Validate = %v, want 422 naming the field", tt.field, err)
		}
	}
	n := valid()
	n.OrderNumber, n.Items[0].ArticleNumber = "A\t1", "SKU\t1"
	if err := n.Validate(); err != nil {
		t.Errorf("tabs: Validate = %v, want nil", err)
	}
}
