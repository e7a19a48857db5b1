package main

import (
	"context"
	"io"
	"log/slog"
	"os"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/grpclog"

	"github.com/fleetlift/fleetlift/internal/gcpace"
	"github.com/fleetlift/fleetlift/internal/logging"
)

// processLog is the process's logger, made once per command from
// --log-format and --log-level, and kept in the command's context.
type processLog struct {
	log   *slog.Logger
	json  bool
	level string
	// levelGiven: --log-level was set (or its variable), so the embedded
	// server's log follows it rather than its own default.
	levelGiven bool
	// lines, with JSON, is the command's standard error: each plain line
	// written there becomes a record.
	lines *logging.LineWriter
}

type processLogKey struct{}

// registerLogging adds --log-format and --log-level to every command, and
// makes the logger before a command runs. With JSON, whatever the command
// writes to standard error as plain text (progress lines, warnings) is
// logged as records instead, and so, when stderr is the process's, are
// the lines of Go's standard logger and gRPC's.
func registerLogging(root *cobra.Command, stderr io.Writer) {
	pf := root.PersistentFlags()
	pf.Var(newChoice(logging.Text, logging.Formats...), "log-format",
		"format of the log lines on standard error, fleetlift's, the Temporal SDK's and the embedded server's: text or json (every line a JSON object)")
	pf.Var(newChoice("info", logging.Levels...), "log-level",
		"least severe level logged: debug, info, warn or error; for fleetlift and the Temporal SDK, and, when set, the embedded Temporal server (whose own default is warn for server, error in temporal.log for up and run)")
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		format, _ := cmd.Flags().GetString("log-format")
		levelFlag := cmd.Flags().Lookup("log-level")
		level, err := logging.ParseLevel(levelFlag.Value.String())
		if err != nil {
			return usageErrorf("--log-level: %v", err)
		}
		l, err := logging.New(stderr, format, level)
		if err != nil {
			return usageErrorf("--log-format: %v", err)
		}
		switch {
		case memory.err != nil:
			l.Debug("no Go memory limit from the cgroup", "error", memory.err)
		case memory.limited:
			l.Debug("Go memory limit", "bytes", memory.limit, "of_cgroup_limit", gcpace.MemoryRatio)
		}
		p := &processLog{log: l, json: format == logging.JSON, level: levelFlag.Value.String(), levelGiven: levelFlag.Changed}
		if p.json {
			p.lines = logging.Lines(l, slog.LevelInfo)
			cmd.Root().SetErr(p.lines)
			if stderr == os.Stderr {
				// The process's own standard error: Go's standard
				// logger and gRPC's write there too.
				slog.SetDefault(l)
				grpclog.SetLoggerV2(grpclog.NewLoggerV2(io.Discard, io.Discard, logging.Lines(l, slog.LevelError)))
			}
		}
		ctx := cmd.Context()
		if ctx == nil {
			ctx = context.Background()
		}
		cmd.SetContext(context.WithValue(ctx, processLogKey{}, p))
		return nil
	}
}

// processLogOf is the logger registerLogging made for the command whose
// context ctx is (or derives from); nil before it ran.
func processLogOf(ctx context.Context) *processLog {
	if ctx == nil {
		return nil
	}
	p, _ := ctx.Value(processLogKey{}).(*processLog)
	return p
}

// processLogger is the process's logger on cmd's standard error, in the
// format and from the level the flags name. The Temporal SDK's client and
// workers log through it too (see temporalFlags.log).
func processLogger(cmd *cobra.Command) (*slog.Logger, error) {
	if p := processLogOf(cmd.Context()); p != nil {
		return p.log, nil
	}
	return logging.New(cmd.ErrOrStderr(), logging.Text, slog.LevelInfo)
}

// serverLog is the level and format of the embedded Temporal server's
// log: --log-level when set, else def; JSON with --log-format json.
func serverLog(ctx context.Context, def string) (level string, json bool) {
	p := processLogOf(ctx)
	if p == nil {
		return def, false
	}
	if p.levelGiven {
		def = p.level
	}
	return def, p.json
}
