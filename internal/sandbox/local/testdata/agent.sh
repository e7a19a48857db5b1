#!/bin/sh
# Stand-in for fleetlift-agent in the local provider's tests: ignores its
# arguments ("serve --workspace DIR") and lives until killed. It forks one
# child, so that Cleanup has a process group to stop, not just one process.
sleep 1000000 &
wait
