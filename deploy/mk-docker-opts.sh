#!/bin/sh
# weft's mk-docker-opts.sh: flannel's options and output (flannel's dist/mk-docker-opts.sh), for
# Docker hosts whose unit runs it after the agent wrote subnet.env. Unlike flannel's script it
# reads subnet.env as data instead of sourcing it as shell, and checks every value it passes on.

usage() {
	echo "$0 [-f FLANNEL-ENV-FILE] [-d DOCKER-ENV-FILE] [-i] [-c] [-m] [-k COMBINED-KEY]

Generate Docker daemon options based on flannel env file
OPTIONS:
	-f	Path to flannel env file. Defaults to /run/flannel/subnet.env
	-d	Path to Docker env file to write to. Defaults to /run/docker_opts.env
	-i	Output each Docker option as individual var. e.g. DOCKER_OPT_MTU=1500
	-c	Output combined Docker options into DOCKER_OPTS var
	-k	Set the combined options key to this value (default DOCKER_OPTS=)
	-m	Do not output --ip-masq (useful for older Docker version)
" >&2
	exit 1
}

fail() {
	echo "$*" >&2
	exit 1
}

flannel_env="/run/flannel/subnet.env"
docker_env="/run/docker_opts.env"
combined_opts_key="DOCKER_OPTS"
indiv_opts=false
combined_opts=false
ipmasq=true

while getopts "f:d:icmk:?h" opt; do
	case $opt in
		f) flannel_env=$OPTARG ;;
		d) docker_env=$OPTARG ;;
		i) indiv_opts=true ;;
		c) combined_opts=true ;;
		m) ipmasq=false ;;
		k) combined_opts_key=$OPTARG ;;
		*) usage ;;
	esac
done

if [ $indiv_opts = false ] && [ $combined_opts = false ]; then
	indiv_opts=true
	combined_opts=true
fi

# The key names a variable (flannel evaluates it): only a shell name is one.
case $combined_opts_key in
	'' | [0-9]* | *[!A-Za-z0-9_]*) fail "Invalid combined options key: $combined_opts_key" ;;
esac

FLANNEL_SUBNET=
FLANNEL_MTU=
FLANNEL_IPMASQ=
if [ -f "$flannel_env" ]; then
	while IFS= read -r line || [ -n "$line" ]; do
		value=${line#*=}
		# A value written in double quotes reads as the shell would read it.
		case $value in \"*\") value=${value#\"}; value=${value%\"} ;; esac
		case $line in
			FLANNEL_SUBNET=*) FLANNEL_SUBNET=$value ;;
			FLANNEL_MTU=*) FLANNEL_MTU=$value ;;
			FLANNEL_IPMASQ=*) FLANNEL_IPMASQ=$value ;;
		esac
	done <"$flannel_env"
fi

case $FLANNEL_SUBNET in
	*[!0-9./]*) fail "Invalid value of FLANNEL_SUBNET: $FLANNEL_SUBNET" ;;
esac
case $FLANNEL_MTU in
	*[!0-9]*) fail "Invalid value of FLANNEL_MTU: $FLANNEL_MTU" ;;
esac

if [ -n "$FLANNEL_SUBNET" ]; then
	DOCKER_OPT_BIP="--bip=$FLANNEL_SUBNET"
fi

if [ -n "$FLANNEL_MTU" ]; then
	DOCKER_OPT_MTU="--mtu=$FLANNEL_MTU"
fi

# The agent masquerades for the pods when it runs with --ip-masq, so Docker must not.
if [ -n "$FLANNEL_IPMASQ" ] && [ $ipmasq = true ]; then
	if [ "$FLANNEL_IPMASQ" = true ]; then
		DOCKER_OPT_IPMASQ="--ip-masq=false"
	elif [ "$FLANNEL_IPMASQ" = false ]; then
		DOCKER_OPT_IPMASQ="--ip-masq=true"
	else
		fail "Invalid value of FLANNEL_IPMASQ: $FLANNEL_IPMASQ"
	fi
fi

eval "docker_opts=\${$combined_opts_key-}"
if [ -n "$docker_opts" ]; then
	docker_opts="$docker_opts "
fi

: >"$docker_env" || exit 1

# Every DOCKER_OPT_ variable in name order, the caller's own included (as flannel's `set | grep`).
for name in $(set | sed -n 's/^\(DOCKER_OPT_[A-Za-z0-9_]*\)=.*/\1/p' | LC_ALL=C sort -u); do
	eval "value=\${$name}"
	if [ "$indiv_opts" = true ]; then
		echo "$name=\"$value\"" >>"$docker_env"
	fi
	docker_opts="$docker_opts $value"
done

if [ "$combined_opts" = true ]; then
	echo "${combined_opts_key}=\"${docker_opts}\"" >>"$docker_env"
fi

# As flannel: a route via a gateway to the node's own subnet means the host routes it elsewhere.
if [ -n "$FLANNEL_SUBNET" ]; then
	dot_four=$(echo "$FLANNEL_SUBNET" | cut -d. -f4 | cut -d/ -f1)
	dot_four=$((dot_four - 1))
	subnets="$(echo "$FLANNEL_SUBNET" | cut -d. -f1,2,3).$dot_four/$(echo "$FLANNEL_SUBNET" | cut -d/ -f2)"
	route_invalid=$(ip route show | grep -F "$subnets" | grep via)
	if [ -n "$route_invalid" ]; then
		fail "Your routing table already contains the subnet: $route_invalid"
	fi
fi
