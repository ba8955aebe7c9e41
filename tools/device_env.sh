# Sourced on the GPU machine (Ubuntu, CUDA, no network): unpacks the Debian packages carried in
# .debs/ (libmicrohttpd, jansson, libuv, pcre2, libunistring) into /tmp/sdroot and points the
# compiler and loader at them. Usage: `source tools/device_env.sh` (with .debs in `carry`).
SD_ROOT=/tmp/sdroot
if [ ! -d "$SD_ROOT/usr" ]; then
    for f in .debs/*.deb; do dpkg-deb -x "$f" "$SD_ROOT"; done
fi
export C_INCLUDE_PATH=$SD_ROOT/usr/include:$SD_ROOT/usr/include/x86_64-linux-gnu${C_INCLUDE_PATH:+:$C_INCLUDE_PATH}
export CPLUS_INCLUDE_PATH=$C_INCLUDE_PATH
export LIBRARY_PATH=$SD_ROOT/usr/lib/x86_64-linux-gnu${LIBRARY_PATH:+:$LIBRARY_PATH}
export LD_LIBRARY_PATH=$SD_ROOT/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
