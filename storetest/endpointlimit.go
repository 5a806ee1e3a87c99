package storetest

import (
	"fmt"
	"strings"
	"sync"

	"storelink"
	"storelink/service"
)

// testEndpointLimit: a client holds at most WithMaxEndpoints endpoints.
// Registrations racing for the last places make exactly as many as fit;
// one more is a conflict that says the bound; a deleted endpoint frees
// its place; another client's endpoints count for that client alone.
func testEndpointLimit(e *env) {
	t, ctx, id := e.t, e.ctx, e.client.ID
	const limit = 4
	s := e.s.With(service.WithMaxEndpoints(limit))
	have, err := s.Webhooks.Endpoints(ctx, id)
	must(t, err)
	if len(have) >= limit {
		t.Fatalf("the client starts with %d endpoints, want fewer than %d", len(have), limit)
	}
	const racers = 8
	var wg sync.WaitGroup
	errs := make(chan error, racers)
	for i := range racers {
		wg.Go(func() {
			_, err := s.Webhooks.CreateEndpoint(ctx, id, storelink.NewEndpoint{URL: fmt.Sprintf("https://race%d.test/", i)}, newSecret())
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	made := 0
	for err := range errs {
		switch storelink.ErrorCode(err) {
		case "":
			made++
		case storelink.ECONFLICT:
			if !strings.Contains(storelink.ErrorMessage(err), fmt.Sprintf("has %d webhook endpoints, the most it may have", limit)) {
				t.Fatalf("refusal %q does not say the bound", storelink.ErrorMessage(err))
			}
		default:
			t.Fatalf("CreateEndpoint racing: %v", err)
		}
	}
	all, err := s.Webhooks.Endpoints(ctx, id)
	must(t, err)
	if made != limit-len(have) || len(all) != limit {
		t.Fatalf("%d racers made %d endpoints, the client has %d; want %d made, %d held", racers, made, len(all), limit-len(have), limit)
	}

	must(t, s.Webhooks.DeleteEndpoint(ctx, id, all[len(all)-1].ID, nil))
	_, err = s.Webhooks.CreateEndpoint(ctx, id, storelink.NewEndpoint{URL: "https://after-delete.test/"}, newSecret())
	must(t, err)
	_, err = s.Webhooks.CreateEndpoint(ctx, id, storelink.NewEndpoint{URL: "https://one-more.test/"}, newSecret())
	wantCode(t, err, storelink.ECONFLICT)

	p, err := s.Partners.CreatePartner(ctx, "Endpoint Limit")
	must(t, err)
	other, err := s.Partners.CreateClient(ctx, p.ID, "NL", "EUR")
	must(t, err)
	_, err = s.Webhooks.CreateEndpoint(ctx, other.ID, storelink.NewEndpoint{URL: "https://other.test/"}, newSecret())
	must(t, err)
}
