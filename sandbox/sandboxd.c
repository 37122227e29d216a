/* mcp-sandboxd: see supervisor.c. */
#include "config.h"

#include "sandbox/supervisor.h"

int main(int argc, char **argv) { return supervisor_main(argc, argv); }
