# The same stack as scripts/run, for a container platform such as Cloud Run
# (second-generation execution environment: gVisor needs a Linux VM, not a
# gVisor sandbox).  nginx listens on $PORT in plain HTTP (the platform
# terminates TLS); the bearer token check stays on.
#
#   docker build -t mcp-sandbox .
#   docker run --privileged -p 8080:8080 -e PORT=8080 \
#     -v /path/to/tokens:/var/lib/mcp-sandbox/tokens:ro mcp-sandbox
FROM debian:12-slim

ENV MCP_STATE_DIR=/var/lib/mcp-sandbox \
    MCP_TLS=off \
    MCP_HOST=0.0.0.0 \
    MCP_PORT=8080

COPY . /opt/mcp-sandbox
WORKDIR /opt/mcp-sandbox

# The install steps are scripts/run's own (scripts/lib/common.sh), then the
# template environment from PyPI.
RUN scripts/setup && \
    apt-get install -y --no-install-recommends python3-pip && \
    pip3 install --break-system-packages --no-cache-dir -r env_requirements.txt && \
    rm -rf /var/lib/apt/lists/*

EXPOSE 8080
CMD ["/bin/sh", "-c", "MCP_PORT=${PORT:-8080} exec scripts/run"]
