#!/bin/sh
# The "remote shell" that Open MPI's rsh launcher (--mca plm_rsh_agent) and MPICH's hydra
# (-launcher ssh -launcher-exec) call to start their daemons on a host of tests/cluster:
#
#   agent.sh [ssh options] <host> <command words…>
#
# <host> is a host's address, 10.30.0.<i + 1>; the command runs in that host's network
# namespace, ${CLUSTER_PREFIX}h<i> (CLUSTER_PREFIX comes from cluster.sh through the
# launcher's environment), in a UTS namespace of its own with the host's name, and is parsed
# by a shell as ssh's remote end would parse it.
while [ $# -gt 0 ]; do
	case $1 in
	-o | -l | -p | -i) shift 2 ;;
	-*) shift ;;
	*) break ;;
	esac
done
host=${1:?usage: agent.sh <host> <command>}
shift
: "${CLUSTER_PREFIX:?CLUSTER_PREFIX is not set}"
i=$((${host##*.} - 1))
ns=${CLUSTER_PREFIX}h$i
exec ip netns exec "$ns" unshare --uts -- sh -c 'hostname "$0" && eval "$*"' "$ns" "$@"
