//! Sans-IO Reliable Connection engine: requester, responder, completer, PSNs, memory regions.
