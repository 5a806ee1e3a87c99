package httpapi

// routes lists every route of the API in one place.
func (s *Server) routes() {
	m := s.mux

	// Operator API, admin token.
	m.HandleFunc("POST /admin/partners", s.admin(s.handleCreatePartner))
	m.HandleFunc("GET /admin/partners", s.admin(s.handleListPartners))
	m.HandleFunc("POST /admin/partners/{partner_id}/clients", s.admin(s.handleCreateClient))
	m.HandleFunc("GET /admin/clients", s.admin(s.handleListClients))
	m.HandleFunc("GET /admin/clients/{client_id}", s.admin(s.handleGetClient))
	m.HandleFunc("POST /admin/clients/{client_id}/api-keys", s.admin(s.handleCreateAPIKey))
	m.HandleFunc("DELETE /admin/clients/{client_id}/api-keys/{key_id}", s.admin(s.handleDeleteAPIKey))
	m.HandleFunc("PUT /admin/clients/{client_id}/stores/{store_id}", s.admin(s.handlePutStore))
	m.HandleFunc("DELETE /admin/clients/{client_id}/stores/{store_id}", s.admin(s.handleDeleteStore))
	m.HandleFunc("GET /admin/clients/{client_id}/webhooks", s.admin(s.handleListClientEndpoints))
	m.HandleFunc("POST /admin/clients/{client_id}/webhooks", s.admin(s.handleCreateEndpoint))
	m.HandleFunc("GET /admin/webhooks/{endpoint_id}", s.admin(s.handleGetEndpoint))
	m.HandleFunc("PATCH /admin/webhooks/{endpoint_id}", s.admin(ofAnyClient(s.patchEndpoint)))
	m.HandleFunc("DELETE /admin/webhooks/{endpoint_id}", s.admin(ofAnyClient(s.deleteEndpoint)))
	m.HandleFunc("POST /admin/webhooks/{endpoint_id}/rotate-secret", s.admin(ofAnyClient(s.rotateSecret)))
	m.HandleFunc("POST /admin/webhooks/{endpoint_id}/recover", s.admin(ofAnyClient(s.recoverDeliveries)))
	m.HandleFunc("POST /admin/webhooks/{endpoint_id}/test", s.admin(s.handleTestEndpoint))
	m.HandleFunc("GET /admin/deliveries", s.admin(s.handleListDeliveries))
	m.HandleFunc("POST /admin/deliveries/{delivery_id}/redeliver", s.admin(s.handleRedeliver))

	// Stock import, x-api-key. Partner routes that write take one of the
	// client's writes (limitRate, Deps.Writes); uploads are bounded by the
	// capacity instead, validations by a rate of their own, reads not.
	m.HandleFunc("PUT /stock/{client_id}/{file}", s.countUpload(s.partner(s.limitInFlight(true, s.handleUpload))))
	m.HandleFunc("PUT /stock/{client_id}/validate", s.partner(s.limitRate(s.validate, s.limitInFlight(false, s.handleValidate))))
	m.HandleFunc("GET /stock/{client_id}/uploads", s.partner(s.handleListUploads))
	m.HandleFunc("GET /stock/{client_id}/uploads/{upload_id}", s.partner(s.handleGetUpload))
	m.HandleFunc("DELETE /stock/{client_id}/uploads/{upload_id}", s.partner(s.limitRate(s.Writes, s.handleCancelUpload)))
	m.HandleFunc("GET /stock/{client_id}/uploads/{upload_id}/file", s.partner(s.handleUploadFile))
	m.HandleFunc("GET /stock/{client_id}/uploads/{upload_id}/errors.csv", s.partner(s.handleUploadErrorFile))
	m.HandleFunc("GET /stock/{client_id}/stock", s.partner(s.handleListStock))

	// Orders, admin token.
	m.HandleFunc("POST /orders", s.countOrder("create", s.admin(s.handleCreateOrder)))
	m.HandleFunc("GET /orders", s.admin(s.handleListOrders))
	m.HandleFunc("GET /orders/{order_id}", s.admin(s.handleGetOrder))
	m.HandleFunc("GET /orders/{order_id}/events", s.admin(s.handleOrderEvents))
	m.HandleFunc("POST /orders/{order_id}/cancel", s.countOrder("cancel", s.admin(s.handleCancelOrder)))
	m.HandleFunc("POST /orders/{order_id}/fulfil", s.countOrder("fulfil", s.admin(s.handleFulfilOrder)))
	m.HandleFunc("POST /orders/{order_id}/returns", s.countOrder("return", s.admin(s.handleReturnItems)))
	m.HandleFunc("POST /warehouse-orders", s.countOrder("warehouse_create", s.admin(s.handleCreateWarehouseOrder)))
	m.HandleFunc("POST /orders/{order_id}/warehouse-returns", s.countOrder("warehouse_return", s.admin(s.handleWarehouseReturn)))

	// Order events, pulled by partners, x-api-key.
	m.HandleFunc("GET /events/{client_id}", s.partner(s.handleEvents))

	// The partner's own webhooks, x-api-key.
	m.HandleFunc("GET /webhooks/{client_id}/endpoints", s.partner(s.handlePartnerEndpoints))
	m.HandleFunc("POST /webhooks/{client_id}/endpoints", s.partner(s.limitRate(s.Writes, s.handleCreateOwnEndpoint)))
	m.HandleFunc("GET /webhooks/{client_id}/endpoints/{endpoint_id}", s.partner(s.handlePartnerEndpoint))
	m.HandleFunc("PATCH /webhooks/{client_id}/endpoints/{endpoint_id}", s.partner(s.limitRate(s.Writes, ofOwnClient(s.patchEndpoint))))
	m.HandleFunc("DELETE /webhooks/{client_id}/endpoints/{endpoint_id}", s.partner(s.limitRate(s.Writes, ofOwnClient(s.deleteEndpoint))))
	m.HandleFunc("POST /webhooks/{client_id}/endpoints/{endpoint_id}/rotate-secret", s.partner(s.limitRate(s.Writes, ofOwnClient(s.rotateSecret))))
	m.HandleFunc("POST /webhooks/{client_id}/endpoints/{endpoint_id}/recover", s.partner(s.limitRate(s.Writes, ofOwnClient(s.recoverDeliveries))))
	m.HandleFunc("POST /webhooks/{client_id}/endpoints/{endpoint_id}/test", s.partner(s.limitRate(s.Writes, s.handlePartnerTestEndpoint)))
	m.HandleFunc("GET /webhooks/{client_id}/deliveries", s.partner(s.handlePartnerDeliveries))
	m.HandleFunc("POST /webhooks/{client_id}/deliveries/{delivery_id}/redeliver", s.partner(s.limitRate(s.Writes, s.handlePartnerRedeliver)))

	// The partner's own API keys, x-api-key.
	m.HandleFunc("GET /clients/{client_id}/api-keys", s.partner(s.handleOwnAPIKeys))
	m.HandleFunc("POST /clients/{client_id}/api-keys", s.partner(s.limitRate(s.Writes, s.handleCreateOwnAPIKey)))
	m.HandleFunc("DELETE /clients/{client_id}/api-keys/{key_id}", s.partner(s.limitRate(s.Writes, s.handleRevokeOwnAPIKey)))

	// Operations.
	m.HandleFunc("GET /healthz", s.handleHealthz)
	m.HandleFunc("GET /readyz", s.handleReadyz)
	m.Handle("GET /metrics", s.metricsRoute())
	m.HandleFunc("GET /problems/{code}", s.handleProblemDoc)
	m.HandleFunc("GET /openapi.yaml", s.handleOpenAPI)

	// The operator dashboard and the partners' portal: HTML pages, not API calls, so they are not in
	// openapi.yaml.
	if s.Dashboard != nil {
		m.Handle("/dashboard/", s.Dashboard)
		m.Handle("/portal/", s.Dashboard)
		m.Handle("GET /{$}", s.Dashboard)
	}
}
