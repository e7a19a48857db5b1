package devserver

import (
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/membership/static"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	"go.temporal.io/server/common/primitives"
	sqliteschema "go.temporal.io/server/schema/sqlite"
	"go.temporal.io/server/temporal"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/fleetlift/fleetlift/internal/devserver/credential"
	"github.com/fleetlift/fleetlift/internal/listen"
)

// Namespace is the namespace fleetlift uses on its embedded server.
const Namespace = "default"

// clusterName is the embedded server's one cluster.
const clusterName = "active"

// SearchAttributes are registered on the embedded server's namespace; the
// workflows set them so run state can be listed without reading histories.
var SearchAttributes = map[string]enumspb.IndexedValueType{
	"FleetliftKind":       enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	"FleetliftID":         enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	"FleetliftCampaign":   enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	"FleetliftSpecDigest": enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	"FleetliftPhase":      enumspb.INDEXED_VALUE_TYPE_KEYWORD,
}

// Options configure the embedded server.
type Options struct {
	// DatabaseFile is the SQLite file. A missing one is made whole or
	// not at all (built beside it under a temporary name, then renamed);
	// an existing one is taken as it is. One server at a time uses it.
	// Empty keeps everything in memory (tests).
	DatabaseFile string
	// IP is the address every service binds to (default 127.0.0.1).
	IP string
	// Port is the frontend gRPC port; 0 picks a free one.
	Port int
	// LogLevel is the server's log level: debug, info, warn, error
	// (default error).
	LogLevel string
	// LogFile receives the server's log; empty means stderr.
	LogFile string
	// LogJSON writes the log as one JSON object a line, not as
	// tab-separated text.
	LogJSON bool
	// TLSDir holds the install's credentials (package credential): made
	// on the first start, reused on every later one. Empty means "tls"
	// beside DatabaseFile or, with no DatabaseFile, an authority made in
	// memory for this server alone. Every listener the server opens
	// requires a client certificate this authority signed; there is no
	// way to turn that off.
	TLSDir string

	// step, when set, is told each step of making the database, and
	// "namespace ready" (tests kill the process there).
	step func(string)
}

// Server is a running embedded Temporal server.
type Server struct {
	server  temporal.Server
	polls   *longPolls
	address string
	creds   *credential.Authority
	unlock  func()
}

// services are the Temporal services the embedded server runs. Temporal's
// system worker ("worker") is not one of them: it runs Temporal's own
// workflows (schedules, batch operations, the scavengers that tidy a
// long-lived database, parent close policies over many children), none
// of which fleetlift uses or needs, and it costs a run about a fifth of
// a CPU second in its first half minute: a quarter of a short run's own
// CPU. A schedule or batch operation made on this server with Temporal's
// CLI is accepted but never runs.
var services = []string{"frontend", "history", "matching"}

// Start starts the server and returns once it serves: it has answered a
// description of the namespace, a look-up of a run and a listing of runs.
// A server that starts but answers these with errors is stopped, and the
// error says so.
func Start(opts Options) (*Server, error) {
	if opts.IP == "" {
		opts.IP = "127.0.0.1"
	}
	if opts.LogLevel == "" {
		opts.LogLevel = "error"
	}
	if opts.Port != 0 {
		// The server's own listener logs a taken port at fatal level,
		// with a stack trace, and never serves: say it plainly before.
		addr := net.JoinHostPort(opts.IP, strconv.Itoa(opts.Port))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("temporal frontend: %w", err)
		}
		ln.Close()
	}
	unlock := func() {}
	if opts.DatabaseFile != "" {
		var err error
		if unlock, err = lockDatabase(opts.DatabaseFile); err != nil {
			return nil, err
		}
	}
	unlock = sync.OnceFunc(unlock)
	s, err := start(opts, unlock)
	if err != nil {
		unlock()
		return nil, err
	}
	return s, nil
}

// start is Start once the database is locked; the server it returns
// releases the lock when it stops.
func start(opts Options, unlock func()) (*Server, error) {
	creds, err := authority(opts)
	if err != nil {
		return nil, err
	}
	ports, err := listen.FreePorts(opts.IP, len(temporal.DefaultServices), opts.Port)
	if err != nil {
		return nil, err
	}
	if opts.Port == 0 {
		opts.Port = ports[0]
	}
	sqlCfg, err := prepareStore(opts)
	if err != nil {
		return nil, err
	}
	cfg := buildConfig(opts, ports, sqlCfg)
	if cfg.Global.TLS, err = tlsConfig(creds, opts.IP); err != nil {
		return nil, err
	}
	// Temporal wants an address for each of its services, the system
	// worker's too, which no one then serves.
	hosts := map[primitives.ServiceName]static.Hosts{}
	for _, name := range temporal.DefaultServices {
		hosts[primitives.ServiceName(name)] = static.SingleLocalHost(net.JoinHostPort(opts.IP, strconv.Itoa(cfg.Services[name].RPC.GRPCPort)))
	}
	// The server logs at fatal level when a service's listener fails,
	// which it does when Stop closes it while the service is still
	// starting: zap would end the whole process (fleetlift up, a test
	// binary). The goroutine that logged it ends instead.
	format := "console"
	if opts.LogJSON {
		format = "json"
	}
	zl := log.BuildZapLogger(log.Config{Level: opts.LogLevel, OutputFile: opts.LogFile, Format: format}).
		WithOptions(zap.WithFatalHook(zapcore.WriteThenGoexit))
	logger := log.NewZapLogger(zl)
	dyn := dynamicconfig.StaticClient{
		dynamicconfig.FrontendMaxNamespaceVisibilityRPSPerInstance.Key(): 100,
		dynamicconfig.HistoryCacheHostLevelMaxSize.Key():                 8192,
		// The worker runs beside the server: hand it activities with the
		// workflow task that schedules them, without a matching round trip.
		dynamicconfig.EnableActivityEagerExecution.Key(): true,
		// One matching host: a task queue in one partition is matched
		// there, with no forwarding between partitions.
		dynamicconfig.MatchingNumTaskqueueReadPartitions.Key():  1,
		dynamicconfig.MatchingNumTaskqueueWritePartitions.Key(): 1,
		// Without the system worker (see services), the history service
		// applies parent close policies itself, however many children.
		dynamicconfig.EnableParentClosePolicyWorker.Key(): false,
		// The namespace and its search attributes are made before the
		// server starts (prepareStore) and never change while it runs:
		// its services need not read them again every 2 seconds, each a
		// query of the database.
		dynamicconfig.NamespaceCacheRefreshInterval.Key(): 10 * time.Minute,
		// Temporal's frontend calls home at start and every day: it posts
		// the cluster's id, its version and the SDKs its clients used to
		// version-info.temporal.io. A server embedded in fleetlift talks
		// to no one but its own clients.
		dynamicconfig.EnableServerVersionCheck.Key(): false,
		// One shard on one SQLite file: the history service's task
		// schedulers need not start Temporal's 512 workers each (timer,
		// transfer, visibility; 64 for in-memory timers; 640 for
		// replication, which a single cluster never does). Those 2,240
		// parked goroutines cost `fleetlift run` about 3,000 page faults
		// at its start and every collection a scan of their stacks. 32
		// each is more than the tasks this server runs at once: each is a
		// short write or a call to matching in the same process.
		dynamicconfig.TimerProcessorSchedulerWorkerCount.Key():                  32,
		dynamicconfig.TransferProcessorSchedulerWorkerCount.Key():               32,
		dynamicconfig.VisibilityProcessorSchedulerWorkerCount.Key():             32,
		dynamicconfig.MemoryTimerProcessorSchedulerWorkerCount.Key():            8,
		dynamicconfig.ReplicationProcessorSchedulerWorkerCount.Key():            1,
		dynamicconfig.ReplicationLowPriorityProcessorSchedulerWorkerCount.Key(): 1,
	}
	polls := &longPolls{}
	srv, err := temporal.NewServer(
		temporal.WithChainedFrontendGrpcInterceptors(polls.intercept),
		temporal.WithConfig(cfg),
		temporal.ForServices(services),
		temporal.WithStaticHosts(hosts),
		temporal.WithLogger(logger),
		temporal.WithDynamicConfigClient(dyn),
	)
	if err != nil {
		return nil, fmt.Errorf("create temporal server: %w", err)
	}
	if err := srv.Start(); err != nil {
		return nil, fmt.Errorf("start temporal server: %w", err)
	}
	s := &Server{server: srv, polls: polls, address: net.JoinHostPort(opts.IP, strconv.Itoa(opts.Port)), creds: creds, unlock: unlock}
	if err := waitListening(s.address, 30*time.Second); err != nil {
		s.Stop()
		return nil, err
	}
	if err := s.checkServes(healthWait); err != nil {
		s.Stop()
		return nil, cannotServe(opts, s.address, err)
	}
	if opts.DatabaseFile != "" {
		// Whoever finds the database locked learns where it is served.
		_ = os.WriteFile(opts.DatabaseFile+lockSuffix, []byte(s.address+"\n"), 0o600)
	}
	return s, nil
}

// cannotServe is the error of a server that started but failed the
// health check: what it answered, where its database and log are, and
// what to do.
func cannotServe(opts Options, addr string, err error) error {
	where := "its database is in memory"
	if opts.DatabaseFile != "" {
		where = "its database is " + opts.DatabaseFile
	}
	if opts.LogFile != "" {
		where += ", its log " + opts.LogFile
	}
	return fmt.Errorf("temporal server on %s started but cannot serve: %w (%s): if the database is damaged, restore it from a backup, or move it aside with its -wal and -shm files to start with an empty one (its runs are then lost)",
		addr, err, where)
}

// Address is the frontend's host:port for SDK clients.
func (s *Server) Address() string { return s.address }

// Stop stops the server and releases its database for the next one.
// Long polls still in flight (its own workers') end first, so that the
// frontend has nothing to drain.
func (s *Server) Stop() {
	s.polls.stop()
	s.server.Stop()
	s.unlock()
}

// ClientTLS is the TLS configuration a client of this server needs: the
// install's client certificate, and its authority as the only one
// trusted for the server's.
func (s *Server) ClientTLS() *tls.Config { return s.creds.ClientTLS() }

// authority reads or makes the install's credentials (see Options.TLSDir).
func authority(opts Options) (*credential.Authority, error) {
	dir := opts.TLSDir
	if dir == "" && opts.DatabaseFile != "" {
		dir = filepath.Join(filepath.Dir(opts.DatabaseFile), "tls")
	}
	if dir == "" {
		return credential.New()
	}
	return credential.Ensure(dir)
}

// tlsConfig has every listener of the server (the frontend and the
// history, matching and worker services) require a client certificate
// from the install's authority, and the server's own connections (between
// its services, and its system worker's to the frontend) present one. The
// server's certificate is issued anew on each start, for the addresses
// clients dial.
func tlsConfig(creds *credential.Authority, ip string) (config.RootTLS, error) {
	certPEM, keyPEM, err := creds.ServerCertificate(serverHosts(ip))
	if err != nil {
		return config.RootTLS{}, err
	}
	b64 := base64.StdEncoding.EncodeToString
	ca := []string{b64(creds.CertificatePEM())}
	server := config.ServerTLS{CertData: b64(certPEM), KeyData: b64(keyPEM), ClientCAData: ca, RequireClientAuth: true}
	client := config.ClientTLS{RootCAData: ca}
	group := config.GroupTLS{Server: server, Client: client}
	return config.RootTLS{
		Internode: group,
		Frontend:  group,
		SystemWorker: config.WorkerTLS{
			CertData: server.CertData, KeyData: server.KeyData, Client: client,
		},
		// The cluster's own frontend address, should the server reach it
		// as a cluster's rather than as its local frontend.
		RemoteClusters: map[string]config.GroupTLS{ip: group},
	}, nil
}

// serverHosts are the names the server's certificate carries: loopback
// by every name, the address it binds, and when that is every interface,
// each interface's address and the host name.
func serverHosts(ip string) []string {
	hosts := []string{"127.0.0.1", "::1", "localhost", ip}
	if parsed := net.ParseIP(ip); parsed != nil && parsed.IsUnspecified() {
		if addrs, err := net.InterfaceAddrs(); err == nil {
			for _, a := range addrs {
				if n, ok := a.(*net.IPNet); ok {
					hosts = append(hosts, n.IP.String())
				}
			}
		}
		if name, err := os.Hostname(); err == nil {
			hosts = append(hosts, name)
		}
	}
	return hosts
}

// prepareStore readies the server's database (see Options.DatabaseFile)
// with fleetlift's namespace and its search attributes, and returns its
// configuration. The namespace is registered after the database is in
// place, by every start that finds none (Temporal's CreateNamespaces
// leaves one that is there alone): a first start killed between the two
// leaves a database without it.
func prepareStore(opts Options) (*config.SQL, error) {
	sqlCfg := sqlConfig(opts.DatabaseFile)
	if opts.DatabaseFile == "" {
		if err := sqliteschema.SetupSchema(sqlCfg); err != nil {
			return nil, fmt.Errorf("set up database schema: %w", err)
		}
	} else if err := prepareDatabase(opts.DatabaseFile, opts.step); err != nil {
		return nil, err
	}
	ns, err := sqliteschema.NewNamespaceConfig(clusterName, Namespace, false, SearchAttributes)
	if err != nil {
		return nil, fmt.Errorf("namespace config: %w", err)
	}
	if err := sqliteschema.CreateNamespaces(sqlCfg, ns); err != nil {
		return nil, fmt.Errorf("temporal database %s: create namespace %s: %w", sqlCfg.DatabaseName, Namespace, err)
	}
	if opts.step != nil {
		opts.step("namespace ready")
	}
	return sqlCfg, nil
}

// sqlConfig is the server's SQLite configuration for file (empty: in
// memory).
func sqlConfig(file string) *config.SQL {
	sqlCfg := &config.SQL{PluginName: sqliteplugin.PluginName}
	if file == "" {
		sqlCfg.ConnectAttributes = map[string]string{"mode": "memory", "cache": "shared"}
		sqlCfg.DatabaseName = fmt.Sprintf("fleetlift-%d-%d", os.Getpid(), time.Now().UnixNano())
	} else {
		// One connection, as Temporal's SQLite plugin has by default:
		// with several, WAL's readers that go on to write fail with
		// "database is locked" (SQLITE_BUSY_SNAPSHOT, which busy_timeout
		// does not wait out) and Temporal retries the whole request; a
		// run of 200 tasks met 82 such failures, and one connection was
		// faster. WAL still spares readers the writer's lock and an fsync
		// per transaction; synchronous=normal is durable across crashes
		// of fleetlift (not necessarily of the machine's power).
		sqlCfg.ConnectAttributes = map[string]string{"mode": "rwc", "journal_mode": "wal", "synchronous": "normal", "busy_timeout": "10000"}
		sqlCfg.DatabaseName = file
		sqlCfg.MaxConns = 1
		sqlCfg.MaxIdleConns = 1
	}
	return sqlCfg
}

// buildConfig is the server's configuration: every service on opts.IP
// (the frontend on opts.Port, the others on ports), persisting as sqlCfg
// says.
func buildConfig(opts Options, ports []int, sqlCfg *config.SQL) *config.Config {
	frontend := net.JoinHostPort(opts.IP, strconv.Itoa(opts.Port))
	cfg := &config.Config{}
	cfg.Global.Membership.MaxJoinDuration = 30 * time.Second
	cfg.Global.Membership.BroadcastAddress = opts.IP
	cfg.Persistence.DefaultStore = "sqlite"
	cfg.Persistence.VisibilityStore = "sqlite"
	cfg.Persistence.NumHistoryShards = 1
	cfg.Persistence.DataStores = map[string]config.DataStore{"sqlite": {SQL: sqlCfg}}
	cfg.ClusterMetadata = &cluster.Config{
		EnableGlobalNamespace:    false,
		FailoverVersionIncrement: 10,
		MasterClusterName:        clusterName,
		CurrentClusterName:       clusterName,
		ClusterInformation: map[string]cluster.ClusterInformation{
			clusterName: {
				Enabled:                true,
				InitialFailoverVersion: 1,
				RPCAddress:             frontend,
				ClusterID:              "fleetlift",
			},
		},
	}
	cfg.DCRedirectionPolicy.Policy = "noop"
	cfg.Services = map[string]config.Service{}
	// ports[0] may be the frontend's; the rest go to the internal
	// services. The frontend's HTTP API stays off (HTTPPort 0): fleetlift
	// speaks gRPC only, and a listener nobody uses is one more to guard.
	for i, name := range temporal.DefaultServices {
		var svc config.Service
		svc.RPC.BindOnIP = opts.IP
		svc.RPC.GRPCPort = ports[i]
		if name == "frontend" {
			svc.RPC.GRPCPort = opts.Port
		}
		cfg.Services[name] = svc
	}
	cfg.Archival.History.State = "disabled"
	cfg.Archival.Visibility.State = "disabled"
	cfg.NamespaceDefaults.Archival.History.State = "disabled"
	cfg.NamespaceDefaults.Archival.Visibility.State = "disabled"
	cfg.PublicClient.HostPort = frontend
	return cfg
}

func waitListening(addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("temporal frontend %s not listening after %s: %w", addr, timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
