# Sourced by the multihost tests: `hosts` hosts on this machine, each a network namespace with its
# own address on a private bridge and its own hostname (node1, node2, ...), and nsrsh, the ssh
# stand-in Open MPI's rsh launcher enters them with (../shared/harness.md, section 4).
# Before sourcing, set: hosts, prefix (namespace names), work (a scratch folder) and skip() (ends
# the test as skipped). Sets net (the /24, one per run so that concurrent runs do not share
# addresses) and the EXIT trap that removes it all.
remove_hosts() {
  for i in $(seq 1 "$hosts"); do ip netns pids $prefix-h$i 2>/dev/null | xargs -r kill -9 2>/dev/null; done
  for i in $(seq 1 "$hosts"); do ip netns del $prefix-h$i 2>/dev/null; done
  ip netns del $prefix-sw 2>/dev/null
  rm -rf "$work"
}
trap remove_hosts EXIT
net=10.$((200 + $$ % 50)).$(( ($$ / 50) % 250 ))
if ! ip netns add $prefix-sw 2>"$work/err"; then skip "cannot create network namespaces: $(cat "$work/err")"; fi
ip -n $prefix-sw link set lo up
ip -n $prefix-sw link add br0 type bridge
ip -n $prefix-sw link set br0 up
for i in $(seq 1 "$hosts"); do
  h=$prefix-h$i
  ip netns add $h
  ip -n $h link set lo up
  ip -n $h link add eth0 type veth peer name veth$i
  ip -n $h link set veth$i netns $prefix-sw
  ip -n $prefix-sw link set veth$i master br0
  ip -n $prefix-sw link set veth$i up
  ip -n $h addr add $net.$((10 + i))/24 dev eth0
  ip -n $h link set eth0 up
done
unshare --uts true 2>/dev/null || skip "unshare --uts is not allowed here"

# nsrsh: host address -> namespace, with its own hostname; the environment is kept.
cat >"$work/nsrsh" <<EOS
#!/bin/bash
while [[ \$# -gt 0 && \$1 == -* ]]; do shift; done
host=\$1; shift
ns=$prefix-h\$(( \${host##*.} - 10 ))
exec nsenter --net=/run/netns/\$ns unshare --uts /bin/sh -c "hostname node\${ns##*-h}; \$*"
EOS
chmod +x "$work/nsrsh"
