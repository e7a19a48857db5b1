// Package imagetest tests the images `make images` builds, in a real
// Docker engine, started the way the Docker provider starts sandboxes: no
// network, every capability dropped but the five the entrypoint needs
// (CAP_CHOWN, CAP_SETUID, CAP_SETGID, CAP_FOWNER, CAP_DAC_OVERRIDE), and
// no-new-privileges. A missing engine or image fails the tests with the
// command that provides it; they never skip.
//
// The package holds only tests. They drive the docker command line and
// import nothing of fleetlift's but a test helper (ocitest, a registry on
// loopback), so they test the images as built, not the code beside them.
package imagetest
