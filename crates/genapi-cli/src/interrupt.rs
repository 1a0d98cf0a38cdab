//! What stops the command early: Ctrl-C, and SIGTERM (what `kill`, a
//! service manager or a container runtime sends), taken the same way, so
//! either ends with the resume line and exit code 130.
//!
//! The handlers are installed when [`interrupted`] is called, not when its
//! future is first polled: a submission raced against the future in a
//! `select!` may be answered within its first poll, before the other branch
//! is ever polled, and a signal arriving then would end the process without
//! the resume line.

use std::future::Future;

/// Listens for Ctrl-C (SIGINT) and SIGTERM from now on; the future resolves
/// on the first of them. Call it before sending anything. Must be called
/// inside the runtime.
pub fn interrupted() -> impl Future<Output = std::io::Result<()>> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let listening =
            signal(SignalKind::interrupt()).and_then(|ctrl_c| Ok((ctrl_c, signal(SignalKind::terminate())?)));
        async move {
            let (mut ctrl_c, mut terminate) = listening?;
            tokio::select! {
                _ = ctrl_c.recv() => Ok(()),
                _ = terminate.recv() => Ok(()),
            }
        }
    }
    #[cfg(not(unix))]
    {
        tokio::signal::ctrl_c()
    }
}

/// Until Ctrl-C or SIGTERM, or `--timeout` when given: how a command that
/// serves (`mock`, `proxy`) runs.
pub async fn served_until_stopped(global: &crate::Global) -> std::io::Result<()> {
    match global.timeout {
        None => interrupted().await,
        Some(_) => tokio::time::timeout(crate::timeout_if_given(global), interrupted())
            .await
            .unwrap_or(Ok(())),
    }
}
