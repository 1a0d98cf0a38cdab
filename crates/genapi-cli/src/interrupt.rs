//! What stops the command early: Ctrl-C, and SIGTERM (what `kill`, a
//! service manager or a container runtime sends), taken the same way, so
//! either ends with the resume line and exit code 130.

/// Resolves on Ctrl-C (SIGINT) or SIGTERM. Both are listened for from the
/// first poll on: poll it once before sending anything.
pub async fn interrupted() -> std::io::Result<()> {
    #[cfg(unix)]
    {
        let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            pressed = tokio::signal::ctrl_c() => pressed,
            _ = terminate.recv() => Ok(()),
        }
    }
    #[cfg(not(unix))]
    {
        tokio::signal::ctrl_c().await
    }
}
