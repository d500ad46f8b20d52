# Pinned by version: a rebuild gets the same interpreter and Debian release.
FROM python:3.12.8-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    CTXPROXY_HOST=0.0.0.0 \
    CTXPROXY_PORT=8080 \
    CTXPROXY_DATA=/data

WORKDIR /app
# Built from a copy outside /app, installed with the pinned versions of constraints.txt, and the
# copy removed: the image holds no build/ or *.egg-info.
COPY pyproject.toml README.md LICENSE constraints.txt /tmp/src/
COPY ctxproxy /tmp/src/ctxproxy
RUN pip install --constraint /tmp/src/constraints.txt "/tmp/src[fast]" && rm -rf /tmp/src \
    && useradd --system --uid 10001 --home-dir /app ctxproxy \
    && mkdir -p /data && chown ctxproxy /data
COPY config ./config

USER ctxproxy
VOLUME ["/app/config", "/data"]
EXPOSE 8080
# /readyz: the store answers and the config is loaded; on the port `serve` listens on ($CTXPROXY_PORT).
HEALTHCHECK --interval=30s --timeout=3s --start-period=5s --retries=3 \
    CMD python -c "import os,sys,urllib.request; sys.exit(urllib.request.urlopen('http://127.0.0.1:%s/readyz' % os.environ.get('CTXPROXY_PORT', '8080'), timeout=2).status != 200)"

ENTRYPOINT ["ctxproxy"]
CMD ["serve", "--config", "/app/config", "--host", "0.0.0.0"]
