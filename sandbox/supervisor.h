/* Entry point of mcp-sandboxd (see supervisor.c). */
#ifndef MCP_SUPERVISOR_H
#define MCP_SUPERVISOR_H

int supervisor_main(int argc, char **argv);

#endif
