# The TOMC gateway for a team (deploy/compose.yaml runs three of these behind nginx, sharing
# conversations through Valkey). Built from this repository:
#   docker build -t tomc-gateway .
#   docker run -p 8787:8787 -e TOMC_STATUS_TOKEN=... tomc-gateway \
#       --host 0.0.0.0 --allow-host gateway.example.com --session-store redis://valkey:6379/0
FROM python:3.12-slim

# No root at run time; the TOMC home (settings, usage ledger) lives in the user's folder.
RUN useradd --create-home --uid 10001 --shell /usr/sbin/nologin tomc
WORKDIR /opt/tomc
COPY pyproject.toml README.md ./
COPY src ./src
# team: the redis client; bpe: exact token counts for OpenAI models.
RUN pip install --no-cache-dir --disable-pip-version-check '.[team,bpe]' && rm -rf src

USER tomc
ENV TOMC_HOME=/home/tomc/.tomc PYTHONUNBUFFERED=1
EXPOSE 8787
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8787/healthz', timeout=2)"]
ENTRYPOINT ["tomc", "gateway", "serve"]
CMD ["--host", "0.0.0.0", "--port", "8787", "--allow-host", "localhost"]
