package main

// webhookSteps register, change, test and re-key the operator's and the
// partner's endpoints, all at the walk's receiver.
func webhookSteps() []step {
	return []step{
		ok("createWebhookEndpoint", "an endpoint at the receiver", 201, authAdmin, "/admin/clients/<client>/webhooks", `{"url":"<receiver>"}`).saving("endpoint", "endpoint_id"),
		ok("createWebhookEndpoint", "one for some states, with an API key", 201, authAdmin, "/admin/clients/<client>/webhooks",
			`{"url":"<receiver>/some","states":["assigned","cancelled"],"api_key":"receiver-key-1"}`),
		bad("createWebhookEndpoint", "no url", 422, authAdmin, "/admin/clients/<client>/webhooks", `{"states":["assigned"]}`),
		bad("createWebhookEndpoint", "a url that is not http(s)", 422, authAdmin, "/admin/clients/<client>/webhooks", `{"url":"ftp://127.0.0.1/hook"}`),
		bad("createWebhookEndpoint", "a state that is none", 422, authAdmin, "/admin/clients/<client>/webhooks", `{"url":"<receiver>","states":["shipped"]}`),
		bad("createWebhookEndpoint", "an unknown client", 404, authAdmin, "/admin/clients/"+unknownID+"/webhooks", `{"url":"<receiver>"}`),
		ok("listClientWebhookEndpoints", "the client's endpoints with their health", 200, authAdmin, "/admin/clients/<client>/webhooks", ""),
		ok("listClientWebhookEndpoints", "a page of one", 200, authAdmin, "/admin/clients/<client>/webhooks?limit=1", ""),
		bad("listClientWebhookEndpoints", "an after that is no cursor", 400, authAdmin, "/admin/clients/<client>/webhooks?after=nope", ""),
		bad("listClientWebhookEndpoints", "a limit out of range", 400, authAdmin, "/admin/clients/<client>/webhooks?limit=0", ""),
		bad("listClientWebhookEndpoints", "an unknown client", 404, authAdmin, "/admin/clients/"+unknownID+"/webhooks", ""),
		ok("getWebhookEndpoint", "the endpoint with its health", 200, authAdmin, "/admin/webhooks/<endpoint>", ""),
		bad("getWebhookEndpoint", "an unknown endpoint", 404, authAdmin, "/admin/webhooks/"+unknownID, ""),
		ok("updateWebhookEndpoint", "enabled, every state", 200, authAdmin, "/admin/webhooks/<endpoint>", `{"enabled":true,"states":[]}`),
		ok("updateWebhookEndpoint", "its API key removed", 200, authAdmin, "/admin/webhooks/<endpoint>", `{"api_key":null}`),
		bad("updateWebhookEndpoint", "a url that is not http(s)", 422, authAdmin, "/admin/webhooks/<endpoint>", `{"url":"gopher://127.0.0.1/"}`),
		bad("updateWebhookEndpoint", "an unknown field", 400, authAdmin, "/admin/webhooks/<endpoint>", `{"enabled":true,"paused":true}`),
		bad("updateWebhookEndpoint", "an unknown endpoint", 404, authAdmin, "/admin/webhooks/"+unknownID, `{"enabled":true}`),
		ok("rotateWebhookSecret", "a new secret, the old one valid for an hour", 200, authAdmin, "/admin/webhooks/<endpoint>/rotate-secret", `{"overlap":"1h"}`),
		ok("rotateWebhookSecret", "a new secret with the default overlap", 200, authAdmin, "/admin/webhooks/<endpoint>/rotate-secret", `{}`),
		bad("rotateWebhookSecret", "an overlap that is no duration", 422, authAdmin, "/admin/webhooks/<endpoint>/rotate-secret", `{"overlap":"soon"}`),
		bad("rotateWebhookSecret", "an unknown endpoint", 404, authAdmin, "/admin/webhooks/"+unknownID+"/rotate-secret", `{}`),
		ok("recoverWebhookDeliveries", "failed deliveries since a time", 202, authAdmin, "/admin/webhooks/<endpoint>/recover", `{"since":"2026-01-01T00:00:00Z"}`),
		bad("recoverWebhookDeliveries", "no since", 422, authAdmin, "/admin/webhooks/<endpoint>/recover", `{}`),
		bad("recoverWebhookDeliveries", "a since that is no time", 422, authAdmin, "/admin/webhooks/<endpoint>/recover", `{"since":"yesterday"}`),
		bad("recoverWebhookDeliveries", "an unknown endpoint", 404, authAdmin, "/admin/webhooks/"+unknownID+"/recover", `{"since":"2026-01-01T00:00:00Z"}`),
		ok("testWebhookEndpoint", "an example event", 200, authAdmin, "/admin/webhooks/<endpoint>/test", ""),
		ok("testWebhookEndpoint", "an example fulfilled event", 200, authAdmin, "/admin/webhooks/<endpoint>/test", `{"state":"fulfilled"}`),
		bad("testWebhookEndpoint", "a state that is none", 422, authAdmin, "/admin/webhooks/<endpoint>/test", `{"state":"shipped"}`),
		bad("testWebhookEndpoint", "an unknown endpoint", 404, authAdmin, "/admin/webhooks/"+unknownID+"/test", ""),

		ok("partnerCreateEndpoint", "the partner's endpoint", 201, authKey, "/webhooks/<client>/endpoints", `{"url":"<receiver>/partner"}`).saving("pendpoint", "endpoint_id"),
		bad("partnerCreateEndpoint", "no url", 422, authKey, "/webhooks/<client>/endpoints", `{}`),
		bad("partnerCreateEndpoint", "a url that is not http(s)", 422, authKey, "/webhooks/<client>/endpoints", `{"url":"file:///etc/passwd"}`),
		ok("partnerListEndpoints", "the client's endpoints", 200, authKey, "/webhooks/<client>/endpoints", ""),
		ok("partnerUpdateEndpoint", "some states", 200, authKey, "/webhooks/<client>/endpoints/<pendpoint>", `{"states":["assigned","fulfilled"]}`),
		bad("partnerUpdateEndpoint", "a url that is not http(s)", 422, authKey, "/webhooks/<client>/endpoints/<pendpoint>", `{"url":"ftp://127.0.0.1/"}`),
		bad("partnerUpdateEndpoint", "an unknown endpoint", 404, authKey, "/webhooks/<client>/endpoints/"+unknownID, `{"enabled":true}`),
		ok("partnerRotateSecret", "a new secret", 200, authKey, "/webhooks/<client>/endpoints/<pendpoint>/rotate-secret", `{}`),
		bad("partnerRotateSecret", "an unknown endpoint", 404, authKey, "/webhooks/<client>/endpoints/"+unknownID+"/rotate-secret", `{}`),
		ok("partnerRecoverDeliveries", "failed deliveries since a time", 202, authKey, "/webhooks/<client>/endpoints/<pendpoint>/recover", `{"since":"2026-01-01T00:00:00Z"}`),
		bad("partnerRecoverDeliveries", "no since", 422, authKey, "/webhooks/<client>/endpoints/<pendpoint>/recover", `{}`),
		ok("partnerTestEndpoint", "an example event", 200, authKey, "/webhooks/<client>/endpoints/<pendpoint>/test", ""),
		bad("partnerTestEndpoint", "a state that is none", 422, authKey, "/webhooks/<client>/endpoints/<pendpoint>/test", `{"state":"shipped"}`),
		bad("partnerTestEndpoint", "an unknown endpoint", 404, authKey, "/webhooks/<client>/endpoints/"+unknownID+"/test", ""),
	}
}

// deliverySteps list and redeliver the deliveries the orders made.
func deliverySteps() []step {
	list := ok("listDeliveries", "the client's deliveries", 200, authAdmin, "/admin/deliveries?client_id=<client>", "")
	list.before = waitDelivery("delivery", "endpoint")
	plist := ok("partnerListDeliveries", "the client's deliveries", 200, authKey, "/webhooks/<client>/deliveries", "")
	plist.before = waitDelivery("pdelivery", "pendpoint")
	return []step{
		list,
		ok("listDeliveries", "the succeeded ones, a page of 5", 200, authAdmin, "/admin/deliveries?state=succeeded&limit=5", ""),
		bad("listDeliveries", "a state that is none", 400, authAdmin, "/admin/deliveries?state=lost", ""),
		bad("listDeliveries", "a limit out of range", 400, authAdmin, "/admin/deliveries?limit=0", ""),
		ok("redeliver", "a succeeded delivery", 202, authAdmin, "/admin/deliveries/<delivery>/redeliver", ""),
		bad("redeliver", "an unknown delivery", 404, authAdmin, "/admin/deliveries/"+unknownID+"/redeliver", ""),
		plist,
		ok("partnerListDeliveries", "to one endpoint", 200, authKey, "/webhooks/<client>/deliveries?endpoint_id=<pendpoint>&limit=5", ""),
		bad("partnerListDeliveries", "a state that is none", 400, authKey, "/webhooks/<client>/deliveries?state=lost", ""),
		ok("partnerRedeliver", "a succeeded delivery", 202, authKey, "/webhooks/<client>/deliveries/<pdelivery>/redeliver", ""),
		bad("partnerRedeliver", "an unknown delivery", 404, authKey, "/webhooks/<client>/deliveries/"+unknownID+"/redeliver", ""),
	}
}
