"""The multi-host lab: network namespaces + sshd on one machine (see harness.py)."""
