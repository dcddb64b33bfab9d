"""xferd's version, the single source: the daemon (`xferd --version`, NodeInfo,
the metrics), the Python wheel (//client/python:wheel) and the .deb
(deploy/build-deb.sh reads the line below) all take it from here."""

XFERD_VERSION = "0.1.0"
