# The same stack as scripts/run, for a container platform such as Cloud Run.
# gVisor needs a Linux VM underneath, not another gVisor: on Cloud Run use
# the second-generation execution environment.  nginx listens on $PORT in
# plain HTTP (the platform terminates TLS); the bearer check stays on, with
# the tokens from the MCP_TOKENS secret ("name:token name2:token2").
#
#   docker build -t mcp-sandbox .
#   docker run --privileged -p 8080:8080 -e MCP_TOKENS="me:$(openssl rand -hex 32)" mcp-sandbox
#
# Cloud Run (README.md, "Cloud Run"):
#   gcloud run deploy mcp-sandbox --source . --execution-environment gen2 \
#     --session-affinity --port 8080 --memory 4Gi --cpu 2 --timeout 3600 \
#     --set-secrets MCP_TOKENS=mcp-tokens:latest --no-allow-unauthenticated
FROM debian:12-slim

ENV MCP_STATE_DIR=/var/lib/mcp-sandbox \
    MCP_TLS=off \
    MCP_HOST=0.0.0.0 \
    MCP_PORT=8080 \
    MCP_TEMPLATE_FROM=pip

COPY . /opt/mcp-sandbox
WORKDIR /opt/mcp-sandbox

# scripts/run's own install steps (scripts/lib/common.sh: the same apt
# packages and build), then the template environment from PyPI.
RUN scripts/setup && \
    pip3 install --break-system-packages --no-cache-dir -r env_requirements.txt && \
    rm -rf /var/lib/apt/lists/* /root/.cache

EXPOSE 8080
HEALTHCHECK CMD curl -sf http://127.0.0.1:${PORT:-8080}/healthz || exit 1
CMD ["/bin/sh", "-c", "MCP_PORT=${PORT:-8080} exec scripts/run"]
