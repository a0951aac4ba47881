#!/bin/sh
# The stand-in for the seed workloads' images (vllm/vllm, Knative's helloworld-go): tagged with
# their exact names so the seed manifests run unchanged on the e2e cluster, it prints the GPU
# environment the container was given (kubectl logs shows it; GET / returns it) and serves HTTP
# on the port the workload would: --port=N in its arguments (vLLM's flag), else $PORT (what
# Knative sets from containerPort), else 8080. Runs under Debian's static busybox.
port=${PORT:-8080}
for a in "$@"; do
  case "$a" in
    --port=*) port=${a#--port=} ;;
  esac
done
case "$port" in
  '' | *[!0-9]*) echo "standin: port must be a number, got '$port'" >&2; exit 2 ;;
esac
mkdir -p /tmp/www
{
  echo "gpushare e2e stand-in: $(hostname)"
  echo "args: $*"
  echo "port: $port"
  env | grep -E '^(NVIDIA_[A-Z_]+|ALIYUN_COM_GPU_MEM_[A-Z_]+|CUDA_[A-Z_]+|GPUSHARE_[A-Z_]+|LD_PRELOAD)=' | sort
} > /tmp/www/index.html
cat /tmp/www/index.html
exec httpd -f -v -p "0.0.0.0:$port" -h /tmp/www
