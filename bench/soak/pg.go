package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"

	"storelink/bench/internal/benchproc"
)

// pgCluster is a PostgreSQL cluster of the soak's own, in its temporary
// folder on a free loopback port: restarting it disturbs nobody else.
// Run as root, its programs run as the postgres user, as initdb requires.
type pgCluster struct {
	bin, dir, data, logfile string
	port                    int
	cred                    *syscall.Credential
}

// startPG makes and starts the cluster.
func startPG(ctx context.Context, binDir, dir string) (*pgCluster, error) {
	if binDir == "" {
		binDir = findPGBin()
	}
	if binDir == "" {
		return nil, errors.New("no initdb found (in /usr/lib/postgresql/*/bin or $PATH): install PostgreSQL's server package, or give -pg-bin")
	}
	port, err := benchproc.FreePort()
	if err != nil {
		return nil, err
	}
	c := &pgCluster{bin: binDir, dir: dir, data: filepath.Join(dir, "data"), logfile: filepath.Join(dir, "postgres.log"), port: port}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("running as root, the cluster needs the postgres user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		c.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			return os.Chown(p, uid, gid)
		}); err != nil {
			return nil, err
		}
	}
	if out, err := c.cmd(ctx, "initdb", "-D", c.data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	if err := c.start(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// findPGBin is the newest /usr/lib/postgresql/*/bin with initdb, or the
// folder of initdb on $PATH.
func findPGBin() string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[i])))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[j])))
		return vi > vj
	})
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p)
	}
	return ""
}

// cmd is a program of the cluster's, run as its owner. pg_ctl's own -t
// bounds its waits; initdb ends by itself.
func (c *pgCluster) cmd(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, name), args...)
	cmd.Dir = c.dir
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	if c.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	}
	return cmd
}

// url is the database the serves share (the cluster's postgres database).
func (c *pgCluster) url() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable&connect_timeout=3", c.port)
}

// start starts the server and waits until it takes connections. fsync is
// off: the soak kills processes, never the machine, and what a killed
// PostgreSQL wrote is in the kernel's cache all the same.
func (c *pgCluster) start(ctx context.Context) error {
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200", c.port, c.dir)
	if out, err := c.cmd(ctx, "pg_ctl", "-D", c.data, "-l", c.logfile, "-o", opts, "-w", "-t", "30", "start").CombinedOutput(); err != nil {
		return fmt.Errorf("pg_ctl start: %v\n%s", err, out)
	}
	return nil
}

// stop stops the server: "immediate" is a crash (recovery at the next
// start), "fast" a clean shutdown that ends every session.
func (c *pgCluster) stop(ctx context.Context, mode string) error {
	if out, err := c.cmd(ctx, "pg_ctl", "-D", c.data, "-m", mode, "-w", "-t", "30", "stop").CombinedOutput(); err != nil {
		return fmt.Errorf("pg_ctl stop -m %s: %v\n%s", mode, err, out)
	}
	return nil
}

func (c *pgCluster) stopForGood() {
	_ = c.stop(context.Background(), "fast")
}
