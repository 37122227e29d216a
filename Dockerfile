# The same stack as scripts/run, as a container: a cell (scripts/run, the
# default command) or the router in front of cells (scripts/router).
# gVisor needs a Linux VM or machine underneath, not another gVisor: on
# Cloud Run use the second-generation execution environment.  The cell
# listens on $PORT (8080) in plain HTTP (the router or the platform
# terminates TLS) and still checks the bearer token, with the tokens from
# the MCP_TOKENS secret ("name:token name2:token2").
#
#   docker build --network=host -t mcp-sandbox .
#   docker run --privileged -p 127.0.0.1:8080:8080 -e MCP_TOKENS="me:$(openssl rand -hex 32)" mcp-sandbox
#
# Without a registry, make the base first (scripts/cluster image does it:
# debootstrap + docker import as debian:12-slim).  The template environment
# (env_requirements.txt) comes from PyPI when it answers, else from
# Debian's packages (MCP_TEMPLATE_FROM=auto; apt or pip force one).
# Cells in Kubernetes and on one machine: README.md, "Cells and the router".
FROM debian:12-slim

SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ARG MCP_TEMPLATE_FROM=auto
ENV MCP_STATE_DIR=/var/lib/mcp-sandbox \
    MCP_INSTALL_DIR=/opt/mcp-sandbox/install \
    MCP_BUILD_DIR=/opt/mcp-sandbox/build \
    MCP_PREBUILT=yes \
    MCP_TLS=off \
    MCP_LOGS=stdout \
    MCP_HOST=0.0.0.0 \
    MCP_PORT=8080 \
    MCP_TEMPLATE_FROM=${MCP_TEMPLATE_FROM}

# The packages first: this layer changes only with the package lists
# (scripts/lib/packages.sh) and env_requirements.txt, so that a change of
# the code rebuilds in a minute.  The router's Lua module is in the same
# image (one image, two commands).
COPY scripts/lib/packages.sh /opt/mcp-sandbox/scripts/lib/packages.sh
COPY env_requirements.txt /opt/mcp-sandbox/env_requirements.txt
RUN . /opt/mcp-sandbox/scripts/lib/packages.sh && \
    install_deps $MCP_APT_ROUTER && \
    install_template /opt/mcp-sandbox/env_requirements.txt && \
    rm -rf /var/lib/apt/lists/* /root/.cache

# The service, built and installed outside the state folder (a volume).
COPY . /opt/mcp-sandbox
WORKDIR /opt/mcp-sandbox
RUN MCP_PREBUILT=no scripts/setup && rm -rf "$MCP_BUILD_DIR" "$MCP_STATE_DIR"/* /opt/mcp-sandbox/autom4te.cache

# 8080: MCP (plain HTTP); 8081: the cell's /metrics and /cell (the router
# and Prometheus; MCP_METRICS_HOST opens it beyond loopback); 8443: the
# router's TLS endpoint.
EXPOSE 8080 8081 8443
# The probe asks the role that runs (MCP_ROLE: cell or router) on its own
# port (scripts/healthcheck).
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s CMD ["/opt/mcp-sandbox/scripts/healthcheck"]
CMD ["/bin/sh", "-c", "MCP_PORT=${PORT:-8080} exec scripts/run"]
