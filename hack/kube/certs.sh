#!/usr/bin/env bash
# certs.sh: the test cluster's CA, certificates, service-account key and kubeconfigs, made
# once with openssl under $PKI (sourced by hack/kube-up.sh; needs lib.sh).
#
# One CA signs everything. Client identities are the certificate's CN (user) and O (groups):
#   admin                kubernetes-admin / system:masters     (kubectl, the scripts)
#   apiserver-kubelet    kube-apiserver-kubelet-client / system:masters (logs, exec)
#   controller-manager   system:kube-controller-manager
#   scheduler            system:kube-scheduler
#   kubelet              system:node:$NODE_NAME / system:nodes  (Node authorizer)
#   kube-proxy           system:kube-proxy
#   coredns              system:narad-coredns  (bound to the narad:coredns ClusterRole by dns.sh)
# Serving certificates: apiserver (node IP, loopback, the `kubernetes` Service IP and names)
# and kubelet (node IP). Keys are EC P-256; the service-account key is RSA 2048.
# The node IP is part of the names, so a changed NARAD_KUBE_NET needs `kube-down.sh --purge`.

# cert NAME CN O KEYUSAGE SAN: key and CA-signed certificate NAME.{key,crt}.
cert() {
	local name="$1" cn="$2" o="$3" eku="$4" san="$5" subj ext
	[[ -s "${PKI}/${name}.crt" ]] && return 0
	subj="/CN=${cn}"
	[[ -n "$o" ]] && subj="/O=${o}${subj}"
	ext="${PKI}/${name}.ext"
	{
		printf 'basicConstraints=critical,CA:FALSE\n'
		printf 'keyUsage=critical,digitalSignature,keyEncipherment\n'
		printf 'extendedKeyUsage=%s\n' "$eku"
		[[ -n "$san" ]] && printf 'subjectAltName=%s\n' "$san"
	} >"$ext"
	openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "${PKI}/${name}.key" 2>/dev/null
	openssl req -new -key "${PKI}/${name}.key" -subj "$subj" -out "${PKI}/${name}.csr"
	openssl x509 -req -in "${PKI}/${name}.csr" -CA "${PKI}/ca.crt" -CAkey "${PKI}/ca.key" \
		-CAcreateserial -days 365 -sha256 -extfile "$ext" -out "${PKI}/${name}.crt" 2>/dev/null
	rm -f "${PKI}/${name}.csr" "$ext"
}

# kubeconfig NAME USER: $PKI/../NAME.kubeconfig for the client certificate USER.{crt,key}.
kubeconfig() {
	local file="${STATE}/$1.kubeconfig" user="$2"
	cat >"$file" <<KC
apiVersion: v1
kind: Config
clusters:
- name: narad-kube
  cluster:
    server: ${APISERVER}
    certificate-authority: ${PKI}/ca.crt
users:
- name: ${user}
  user:
    client-certificate: ${PKI}/${user}.crt
    client-key: ${PKI}/${user}.key
contexts:
- name: narad-kube
  context: {cluster: narad-kube, user: ${user}}
current-context: narad-kube
KC
}

make_certs() {
	mkdir -p "$PKI"
	chmod 700 "$PKI"
	if [[ ! -s "${PKI}/ca.crt" ]]; then
		openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "${PKI}/ca.key" 2>/dev/null
		openssl req -x509 -new -key "${PKI}/ca.key" -subj "/CN=narad-kube-ca" -days 365 -sha256 \
			-addext "basicConstraints=critical,CA:TRUE" \
			-addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" \
			-out "${PKI}/ca.crt"
	fi
	if [[ ! -s "${PKI}/sa.key" ]]; then
		openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "${PKI}/sa.key" 2>/dev/null
		openssl pkey -in "${PKI}/sa.key" -pubout -out "${PKI}/sa.pub"
	fi
	local api_san="IP:${NODE_IP},IP:127.0.0.1,IP:${SVC_IP},DNS:localhost,DNS:kubernetes"
	api_san+=",DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
	cert apiserver kube-apiserver "" serverAuth "$api_san"
	cert kubelet-serving "$NODE_NAME" "" serverAuth "IP:${NODE_IP},DNS:${NODE_NAME}"
	cert admin kubernetes-admin system:masters clientAuth ""
	cert apiserver-kubelet kube-apiserver-kubelet-client system:masters clientAuth ""
	cert controller-manager system:kube-controller-manager "" clientAuth ""
	cert scheduler system:kube-scheduler "" clientAuth ""
	cert kubelet "system:node:${NODE_NAME}" system:nodes clientAuth ""
	cert kube-proxy system:kube-proxy "" clientAuth ""
	cert coredns system:narad-coredns "" clientAuth ""
	kubeconfig admin admin
	kubeconfig controller-manager controller-manager
	kubeconfig scheduler scheduler
	kubeconfig kubelet kubelet
	kubeconfig kube-proxy kube-proxy
	kubeconfig coredns coredns
}
