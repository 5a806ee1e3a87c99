package storelink_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"storelink"
)

// The bounds that keep each contract narrow: an area's driver interface
// and its transaction interface have at most maxDriverMethods methods, and
// no type exports more than maxExported (its own methods and those its
// embedded fields promote).
const (
	maxDriverMethods = 20
	maxExported      = 25
)

// pkgDecls are one package's interfaces and types as parsed, by name.
type pkgDecls struct {
	ifaces  map[string]*ast.InterfaceType
	structs map[string]*ast.StructType
	methods map[string][]string // exported methods declared on T or *T
}

// parseModule parses every package of the module but the generated
// client, without its tests, by folder.
func parseModule(t *testing.T) map[string]*pkgDecls {
	t.Helper()
	fset := token.NewFileSet()
	out := map[string]*pkgDecls{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "genclient" || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		entries, err := os.ReadDir(path)
		if err != nil {
			return err
		}
		pkgs := map[string][]*ast.File{}
		for _, e := range entries {
			if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, filepath.Join(path, e.Name()), nil, 0)
			if err != nil {
				return err
			}
			pkgs[f.Name.Name] = append(pkgs[f.Name.Name], f)
		}
		for _, files := range pkgs {
			p := &pkgDecls{ifaces: map[string]*ast.InterfaceType{}, structs: map[string]*ast.StructType{}, methods: map[string][]string{}}
			for _, f := range files {
				for _, decl := range f.Decls {
					switch decl := decl.(type) {
					case *ast.GenDecl:
						for _, spec := range decl.Specs {
							ts, ok := spec.(*ast.TypeSpec)
							if !ok || ts.Assign.IsValid() {
								continue
							}
							switch tt := ts.Type.(type) {
							case *ast.InterfaceType:
								p.ifaces[ts.Name.Name] = tt
							case *ast.StructType:
								p.structs[ts.Name.Name] = tt
							}
						}
					case *ast.FuncDecl:
						if decl.Recv == nil || !decl.Name.IsExported() {
							continue
						}
						if name := typeName(decl.Recv.List[0].Type); name != "" {
							p.methods[name] = append(p.methods[name], decl.Name.Name)
						}
					}
				}
			}
			out[filepath.ToSlash(path)] = p
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// typeName is the name of the type T in T, *T, T[X] or *T[X].
func typeName(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

// ifaceMethods lists the methods of the interface name, with those of the
// interfaces of the same package it embeds.
func (p *pkgDecls) ifaceMethods(name string) []string {
	seen := map[string]bool{}
	var walk func(string)
	walk = func(n string) {
		it := p.ifaces[n]
		if it == nil {
			return
		}
		for _, m := range it.Methods.List {
			if len(m.Names) > 0 {
				for _, id := range m.Names {
					seen[id.Name] = true
				}
				continue
			}
			if id, ok := m.Type.(*ast.Ident); ok {
				walk(id.Name)
			}
		}
	}
	walk(name)
	return sortedKeys(seen)
}

// exported lists the exported methods of the type name: its own and those
// its embedded fields of the same package promote.
func (p *pkgDecls) exported(name string) []string {
	seen := map[string]bool{}
	var walk func(string, int)
	walk = func(n string, depth int) {
		if depth > 8 {
			return
		}
		for _, m := range p.methods[n] {
			seen[m] = true
		}
		if it := p.ifaces[n]; it != nil && depth > 0 {
			for _, m := range p.ifaceMethods(n) {
				if token.IsExported(m) {
					seen[m] = true
				}
			}
		}
		if st := p.structs[n]; st != nil {
			for _, f := range st.Fields.List {
				if len(f.Names) == 0 {
					walk(typeName(f.Type), depth+1)
				}
			}
		}
	}
	walk(name, 0)
	return sortedKeys(seen)
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Every area's driver and transaction interfaces in package service stay
// within maxDriverMethods, and no type of the module exports more than
// maxExported methods.
func TestContractsStayNarrow(t *testing.T) {
	mod := parseModule(t)
	svc := mod["service"]
	if svc == nil {
		t.Fatal("package service not found")
	}
	n := 0
	for name := range svc.ifaces {
		if !strings.HasSuffix(name, "Driver") && !strings.HasSuffix(name, "Tx") {
			continue
		}
		n++
		if ms := svc.ifaceMethods(name); len(ms) > maxDriverMethods {
			t.Errorf("service.%s has %d methods, more than %d: %v", name, len(ms), maxDriverMethods, ms)
		}
	}
	if n < 5 {
		t.Errorf("found %d driver and transaction interfaces in package service, want one per area at least", n)
	}
	for path, p := range mod {
		names := map[string]bool{}
		for name := range p.methods {
			names[name] = true
		}
		for name := range p.structs {
			names[name] = true
		}
		for name := range names {
			if ms := p.exported(name); len(ms) > maxExported {
				t.Errorf("%s.%s exports %d methods, more than %d: %v", path, name, len(ms), maxExported, ms)
			}
		}
		for name := range p.ifaces {
			if ms := p.ifaceMethods(name); len(ms) > maxExported {
				t.Errorf("%s.%s has %d methods, more than %d", path, name, len(ms), maxExported)
			}
		}
	}
}

// stateLiterals counts, per driver file and state, the SQL literals
// ('assigned', 'pending', …) of the domain's order, item, upload and
// delivery states that the drivers' code names.
func stateLiterals(t *testing.T) map[string]int {
	t.Helper()
	states := domainStates()
	found := map[string]int{}
	for _, dir := range []string{"sqlite", "postgres"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range states {
				if n := strings.Count(string(b), "'"+s+"'"); n > 0 {
					found[filepath.ToSlash(f)+" '"+s+"'"] = n
				}
			}
		}
	}
	return found
}

// domainStates are the order, item, upload and delivery states, each once.
func domainStates() []string {
	var states []string
	for _, s := range storelink.OrderStates {
		states = append(states, string(s))
	}
	for _, s := range []storelink.ItemStatus{storelink.ItemAssigned, storelink.ItemCancelled, storelink.ItemFulfilled, storelink.ItemReturned} {
		states = append(states, string(s))
	}
	for _, s := range []storelink.UploadStatus{storelink.UploadAccepted, storelink.UploadProcessing, storelink.UploadApplied, storelink.UploadRejected, storelink.UploadCancelled} {
		states = append(states, string(s))
	}
	for _, s := range storelink.DeliveryStates {
		states = append(states, string(s))
	}
	return slices.Compact(slices.Sorted(slices.Values(states)))
}

// The states a rule names reach the drivers as parameters from package
// service; the drivers' code names a state only in the predicate of a
// partial index, which a query must repeat for the database to use the
// index. allowedStateLiterals lists those, and a new one fails here.
func TestDriversNameNoStates(t *testing.T) {
	found := stateLiterals(t)
	for k, n := range found {
		if allowedStateLiterals[k] != n {
			t.Errorf("%s appears %d times in driver code, allowed %d: pass the state from the service as a parameter, or list a partial-index predicate in allowedStateLiterals", k, n, allowedStateLiterals[k])
		}
	}
	for k, n := range allowedStateLiterals {
		if found[k] == 0 {
			t.Errorf("%s is allowed %d times but no longer appears: take it off allowedStateLiterals", k, n)
		}
	}
}

// allowedStateLiterals are the state literals the drivers' code may name,
// by file: the predicates of partial indexes, which a query must repeat
// word for word for the database to plan with the index. In SQLite a
// query INDEXED BY a partial index does not prepare with the state bound;
// in PostgreSQL a statement that may run on a generic plan (pgx prepares
// the statements it runs, and PostgreSQL may settle on one plan for every
// set of parameters) cannot use a partial index for a bound state.
var allowedStateLiterals = map[string]int{
	// The uploads' status IN ('accepted', 'processing'): the partial
	// indexes of unfinished uploads.
	"postgres/upload.go 'accepted'":       1,
	"postgres/upload.go 'processing'":     1,
	"postgres/uploadread.go 'accepted'":   5,
	"postgres/uploadread.go 'processing'": 5,
	"sqlite/upload.go 'accepted'":         1,
	"sqlite/upload.go 'processing'":       1,
	"sqlite/uploadread.go 'accepted'":     4,
	"sqlite/uploadread.go 'processing'":   4,

	// The counts of pending and failed deliveries, of all and of each
	// endpoint, and the cancellation of an endpoint's pending deliveries
	// and recovery of its failed ones: the partial indexes of pending
	// deliveries (deliveries_endpoint_due, …) and of failed ones
	// (deliveries_failed_endpoint).
	"postgres/endpoint.go 'failed'":     1,
	"postgres/endpoint.go 'pending'":    1,
	"postgres/endpointops.go 'failed'":  2,
	"postgres/endpointops.go 'pending'": 2,
	// The listings of pending and failed deliveries (INDEXED BY
	// deliveries_pending, deliveries_failed), the count of pending ones
	// (deliveries_pending) and of failed ones (INDEXED BY
	// deliveries_failed).
	"sqlite/endpoint.go 'failed'":  2,
	"sqlite/endpoint.go 'pending'": 2,
	// The stats' counts and the cancellation of an endpoint's pending
	// deliveries (INDEXED BY deliveries_pending), the stats' counts and the
	// recovery of its failed ones (INDEXED BY deliveries_failed_endpoint).
	"sqlite/endpointops.go 'failed'":  2,
	"sqlite/endpointops.go 'pending'": 2,
	// The deliverer's queue, read from deliveries_pending (INDEXED BY).
	"sqlite/queue.go 'pending'": 1,
}

// partialIndex is a CREATE INDEX … WHERE of a migration's Up section: the
// index's name and its predicate.
var partialIndex = regexp.MustCompile(`(?is)CREATE\s+(?:UNIQUE\s+)?INDEX\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)\s+ON\s+[^;]*?\bWHERE\b([^;]*);`)

// Every partial index whose predicate names a state is listed in
// allowedStatePredicates, which the drivers' queries repeat (see
// allowedStateLiterals): a migration that adds another must add it there
// too, saying which queries need it, rather than a rule's state slipping
// into the schema unseen. The migrations are read whole, the indexes that
// later ones dropped included: a migration never changes once released.
func TestMigrationsStatePredicates(t *testing.T) {
	states := domainStates()
	found := map[string]bool{}
	for _, dir := range []string{"sqlite", "postgres"} {
		files, err := filepath.Glob(filepath.Join(dir, "migrations", "*.sql"))
		if err != nil {
			t.Fatal(err)
		}
		if len(files) == 0 {
			t.Fatalf("no migration found under %s/migrations", dir)
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			up, _, _ := strings.Cut(string(b), "-- +goose Down")
			for _, m := range partialIndex.FindAllStringSubmatch(up, -1) {
				pred := strings.Join(strings.Fields(m[2]), " ")
				if slices.ContainsFunc(states, func(s string) bool { return strings.Contains(pred, "'"+s+"'") }) {
					found[dir+" "+m[1]+": "+pred] = true
				}
			}
		}
	}
	for k := range found {
		if !allowedStatePredicates[k] {
			t.Errorf("the partial index %s names a state and is not in allowedStatePredicates: list it, with the queries that repeat its predicate", k)
		}
	}
	for k := range allowedStatePredicates {
		if !found[k] {
			t.Errorf("%s is in allowedStatePredicates but no migration creates it: take it off", k)
		}
	}
}

// allowedStatePredicates are the partial indexes whose predicates name
// states, by database, name and predicate: the unfinished uploads, the
// rejected ones, and the pending and the failed deliveries.
var allowedStatePredicates = map[string]bool{
	"postgres deliveries_due: state = 'pending'":                                true,
	"postgres deliveries_endpoint_due: state = 'pending'":                       true,
	"postgres deliveries_failed_endpoint: state = 'failed'":                     true,
	"postgres deliveries_leased: state = 'pending' AND lease_until IS NOT NULL": true,
	"postgres deliveries_order: state = 'pending'":                              true,
	"postgres uploads_rejected: status = 'rejected'":                            true,
	"postgres uploads_unfinished: status IN ('accepted', 'processing')":         true,
	"postgres uploads_unfinished_client: status IN ('accepted', 'processing')":  true,
	"sqlite deliveries_due: state = 'pending'":                                  true,
	"sqlite deliveries_failed: state = 'failed'":                                true,
	"sqlite deliveries_failed_endpoint: state = 'failed'":                       true,
	"sqlite deliveries_leased: state = 'pending' AND lease_until IS NOT NULL":   true,
	"sqlite deliveries_order: state = 'pending'":                                true,
	"sqlite deliveries_pending: state = 'pending'":                              true,
	"sqlite uploads_rejected: status = 'rejected'":                              true,
	"sqlite uploads_unfinished: status IN ('accepted', 'processing')":           true,
	"sqlite uploads_unfinished_client: status IN ('accepted', 'processing')":    true,
}
