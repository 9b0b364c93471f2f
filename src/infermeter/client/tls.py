"""How the client trusts the server and proves who it is over https (--ca-bundle, --insecure, --client-cert,
--client-key): one SSL context for the load's connections, the side requests and the metrics scraper alike."""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path

from infermeter.errors import UserError


@dataclass(frozen=True)
class TlsOptions:
    ca_bundle: Path | None = None  # trust these CAs instead of the system's
    insecure: bool = False  # verify neither the certificate nor the host name (declared in run.json)
    client_cert: Path | None = None  # PEM certificate (and key, unless client_key) for mutual TLS
    client_key: Path | None = None

    def context(self) -> ssl.SSLContext:
        """The SSL context of an https connection; a file that cannot be read is a one-line UserError."""
        try:
            ctx = ssl.create_default_context(cafile=str(self.ca_bundle) if self.ca_bundle else None)
        except (OSError, ssl.SSLError) as exc:
            raise UserError(f"--ca-bundle {self.ca_bundle}: {_why(exc)}: give a PEM file of CA certificates") from None
        if self.insecure:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        if self.client_cert is not None:
            try:  # an encrypted key would otherwise ask for its passphrase on the terminal
                key = str(self.client_key) if self.client_key else None
                ctx.load_cert_chain(str(self.client_cert), key, password=_no_passphrase)
            except _Encrypted:
                raise UserError(
                    f"--client-key {self.client_key or self.client_cert} is encrypted: give an unencrypted PEM key"
                ) from None
            except (OSError, ssl.SSLError) as exc:
                raise UserError(
                    f"--client-cert {self.client_cert}: {_why(exc)}: give a PEM certificate and its key (--client-key)"
                ) from None
        return ctx

    def declaration(self) -> str | None:
        """run.json's line about it (None: the system's CAs, verified, no client certificate)."""
        parts = []
        if self.insecure:
            parts.append("insecure: the server's certificate is not verified")
        elif self.ca_bundle is not None:
            parts.append(f"CA bundle {self.ca_bundle.name}")
        if self.client_cert is not None:
            parts.append(f"client certificate {self.client_cert.name}")
        return "; ".join(parts) or None


class _Encrypted(Exception):
    """The client key asks for a passphrase."""


def _no_passphrase() -> str:
    raise _Encrypted


def _why(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
