package main

import (
	"encoding/json"
	"fmt"
)

// A uuid of the right form that names nothing.
const unknownID = "01a1fd19-0000-7000-8000-000000000000"

// handSteps are the walk's own requests, in an order that takes the
// service from empty through every operation: each valid request first
// makes what later ones use (kept as <vars>), then the wrong requests
// particular to the operation. Deletions come last.
func handSteps(sp *spec) []step {
	var s []step
	add := func(st ...step) { s = append(s, st...) }

	// Operations: no credentials, but for the metrics (the admin token;
	// the variants send none and a wrong one).
	add(
		ok("healthz", "liveness", 200, authNone, "/healthz", ""),
		ok("readyz", "readiness", 200, authNone, "/readyz", ""),
		ok("metrics", "metrics", 200, authAdmin, "/metrics", ""),
		ok("openapi", "the spec itself", 200, authNone, "/openapi.yaml", ""),
	)
	for _, code := range sp.problemCodes {
		add(ok("problemType", "the explanation of "+code, 200, authNone, "/problems/"+code, ""))
	}
	add(bad("problemType", "a code that is none", 404, authNone, "/problems/no_such_code", ""))

	// Partners and clients.
	add(
		ok("createPartner", "a partner", 201, authAdmin, "/admin/partners", `{"name":"Walk Retail"}`).saving("partner", "partner_id"),
		bad("createPartner", "no name", 400, authAdmin, "/admin/partners", `{}`),
		bad("createPartner", "an unknown field", 400, authAdmin, "/admin/partners", `{"name":"Walk","nickname":"w"}`),
		bad("createPartner", "a name of the wrong type", 400, authAdmin, "/admin/partners", `{"name":7}`),
		bad("createPartner", "a control character in the name", 422, authAdmin, "/admin/partners", `{"name":"Walk\u0007"}`),
		ok("listPartners", "the first page", 200, authAdmin, "/admin/partners?limit=10", ""),
		ok("listPartners", "by name", 200, authAdmin, "/admin/partners?q=walk", ""),
		bad("listPartners", "a limit out of range", 400, authAdmin, "/admin/partners?limit=0", ""),
		bad("listPartners", "a cursor this call did not give out", 400, authAdmin, "/admin/partners?after=nonsense", ""),
		ok("createClient", "the partner's client for DE", 201, authAdmin, "/admin/partners/<partner>/clients", `{"country_code":"DE","currency":"EUR"}`).
			saving("client", "client_id").saving("key", "api_key"),
		ok("createClient", "its client for AT", 201, authAdmin, "/admin/partners/<partner>/clients", `{"country_code":"at","currency":"eur"}`).
			saving("client2", "client_id").saving("otherkey", "api_key"),
		bad("createClient", "a second client for DE", 409, authAdmin, "/admin/partners/<partner>/clients", `{"country_code":"DE","currency":"EUR"}`),
		bad("createClient", "an unknown partner", 404, authAdmin, "/admin/partners/"+unknownID+"/clients", `{"country_code":"FR","currency":"EUR"}`),
		bad("createClient", "no currency", 400, authAdmin, "/admin/partners/<partner>/clients", `{"country_code":"FR"}`),
		bad("createClient", "a country that is not two letters", 400, authAdmin, "/admin/partners/<partner>/clients", `{"country_code":"France","currency":"EUR"}`),
		ok("listClients", "the partner's clients", 200, authAdmin, "/admin/clients?partner_id=<partner>", ""),
		bad("listClients", "a limit out of range", 400, authAdmin, "/admin/clients?limit=501", ""),
		ok("getClient", "the client", 200, authAdmin, "/admin/clients/<client>", ""),
		bad("getClient", "an unknown client", 404, authAdmin, "/admin/clients/"+unknownID, ""),
		ok("createAPIKey", "a further key", 201, authAdmin, "/admin/clients/<client>/api-keys", "").saving("adminkey", "key_id"),
		bad("createAPIKey", "an unknown client", 404, authAdmin, "/admin/clients/"+unknownID+"/api-keys", ""),
	)

	// Stores.
	add(
		ok("putStore", "a new store", 201, authAdmin, "/admin/clients/<client>/stores/S1", `{"name":"Berlin Mitte"}`),
		ok("putStore", "the store renamed", 200, authAdmin, "/admin/clients/<client>/stores/S1", `{"name":"Berlin-Mitte"}`),
		ok("putStore", "a second store", 201, authAdmin, "/admin/clients/<client>/stores/S2", `{"name":"Hamburg"}`),
		ok("putStore", "a store without a name", 201, authAdmin, "/admin/clients/<client>/stores/S3", `{}`),
		bad("putStore", "a control character in the name", 422, authAdmin, "/admin/clients/<client>/stores/S1", `{"name":"Berlin\u0007"}`),
		bad("putStore", "an unknown client", 404, authAdmin, "/admin/clients/"+unknownID+"/stores/S1", `{"name":"Berlin"}`),
		bad("putStore", "an unknown field", 400, authAdmin, "/admin/clients/<client>/stores/S1", `{"name":"Berlin","city":"Berlin"}`),
	)

	s = append(s, webhookSteps()...)
	s = append(s, stockSteps()...)
	s = append(s, orderSteps()...)
	s = append(s, deliverySteps()...)

	// Keys, and the deletions.
	add(
		ok("partnerListAPIKeys", "the client's keys", 200, authKey, "/clients/<client>/api-keys", ""),
		ok("partnerCreateAPIKey", "a further key", 201, authKey, "/clients/<client>/api-keys", "").saving("ownkey", "key_id"),
		ok("partnerRevokeAPIKey", "that key", 204, authKey, "/clients/<client>/api-keys/<ownkey>", ""),
		bad("partnerRevokeAPIKey", "an unknown key", 404, authKey, "/clients/<client>/api-keys/"+unknownID, ""),
		bad("partnerRevokeAPIKey", "the other client's last key", 409, authOtherKey, "/clients/<client2>/api-keys/<client2key>", ""),
		ok("deleteAPIKey", "the further key", 204, authAdmin, "/admin/clients/<client>/api-keys/<adminkey>", ""),
		bad("deleteAPIKey", "an unknown key", 404, authAdmin, "/admin/clients/<client>/api-keys/"+unknownID, ""),
		ok("deleteStore", "the second store", 204, authAdmin, "/admin/clients/<client>/stores/S2", ""),
		bad("deleteStore", "an unknown store", 404, authAdmin, "/admin/clients/<client>/stores/S9", ""),
		ok("partnerGetEndpoint", "the partner's endpoint", 200, authKey, "/webhooks/<client>/endpoints/<pendpoint>", ""),
		bad("partnerGetEndpoint", "an unknown endpoint", 404, authKey, "/webhooks/<client>/endpoints/"+unknownID, ""),
		ok("partnerDeleteEndpoint", "the partner's endpoint", 204, authKey, "/webhooks/<client>/endpoints/<pendpoint>", ""),
		bad("partnerDeleteEndpoint", "an unknown endpoint", 404, authKey, "/webhooks/<client>/endpoints/"+unknownID, ""),
		ok("deleteWebhookEndpoint", "the operator's endpoint", 204, authAdmin, "/admin/webhooks/<endpoint>", ""),
		bad("deleteWebhookEndpoint", "an unknown endpoint", 404, authAdmin, "/admin/webhooks/"+unknownID, ""),
		bad("testWebhookEndpoint", "a deleted endpoint", 409, authAdmin, "/admin/webhooks/<endpoint>/test", ""),
		bad("redeliver", "a delivery of a deleted endpoint", 409, authAdmin, "/admin/deliveries/<delivery>/redeliver", ""),
	)
	return withOtherKeyID(s)
}

// withOtherKeyID puts, before the first partnerRevokeAPIKey, a listing of
// the other client's keys (its own key) that keeps its only key's id as
// <client2key>.
func withOtherKeyID(s []step) []step {
	for i, st := range s {
		if st.op != "partnerRevokeAPIKey" {
			continue
		}
		list := ok("partnerListAPIKeys", "the other client's keys, with its own key", 200, authOtherKey, "/clients/<client2>/api-keys", "")
		list.after = func(w *walker, a *answer) error {
			var l struct {
				Keys []struct {
					ID string `json:"key_id"`
				} `json:"api_keys"`
			}
			if err := json.Unmarshal(a.body, &l); err != nil || len(l.Keys) != 1 {
				return fmt.Errorf("the other client's keys: want its one key, got %s (%v)", short(a.body, 200), err)
			}
			w.vars["client2key"] = l.Keys[0].ID
			return nil
		}
		return append(s[:i:i], append([]step{list}, s[i:]...)...)
	}
	return s
}
