# Claude Code: register confine as a stdio MCP server for one workspace.
claude mcp add confine -- confine mcp --root /path/to/workspace
