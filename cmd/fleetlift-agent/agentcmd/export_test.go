package agentcmd

// ServeGit is serveGit, for tests.
var ServeGit = serveGit
