"""Kubernetes pods by name for the processes whose cgroup names a pod: sources (the API server, the kubelet's log
directories), what their answers are held to, and the resolver the host collector asks (docs/kubernetes.md)."""
