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
