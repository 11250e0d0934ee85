# Claude Code over HTTP: start the server (it creates the token file, mode 0600, when missing),
# then register its URL with the token as a bearer header.
confine mcp --root /path/to/workspace --http 127.0.0.1:8765 --http-token-file ~/.confine-http-token
claude mcp add --transport http confine http://127.0.0.1:8765/mcp --header "Authorization: Bearer $(cat ~/.confine-http-token)"
