#!/bin/sh
# The e2e stand-in for the seed manifests' workload images (docs/e2e.md): prints the GPU
# environment it was given, then serves HTTP on the seed's port: --port=N from the arguments
# (vllm), else $PORT (what Knative sets for the user container), else 8080.
port=${PORT:-8080}
for a in "$@"; do
  case $a in --port=*) port=${a#--port=} ;; esac
done
echo "standin: args: $*"
env | grep -E '^(NVIDIA|ALIYUN|GPUSHARE|CUDA)' | sort | sed 's/^/standin: env: /'
mkdir -p /tmp/www
env | grep -E '^(NVIDIA|ALIYUN)' | sort >/tmp/www/index.html
echo "standin: serving on :$port"
exec httpd -f -p "$port" -h /tmp/www
