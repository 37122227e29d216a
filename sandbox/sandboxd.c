/* mcp-sandboxd: see supervisor.c. */
#include "config.h"

#include "supervisor.h"

int main(int argc, char **argv) { return supervisor_main(argc, argv); }
