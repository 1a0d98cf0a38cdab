//! What the service says about a task: the body of its poll result, the
//! signed address of its output, and the wait for its end (for webhooks).

use std::time::UNIX_EPOCH;

use serde_json::{json, Value};

use super::state::{Media, MockTask, Outcome, State};

/// The poll result of a task, as the service would answer it now.
pub(super) fn poll_body(state: &State, id: &str) -> Value {
    let now = state.clock.now();
    let task = state.tasks.lock().ok().and_then(|mut t| {
        t.tidy(now);
        t.get(id).cloned()
    });
    let Some(task) = task.filter(|t| now < t.finished_at() + state.config.task_ttl) else {
        return json!({"id": id, "status": "Task not found", "result": null, "progress": null, "details": null, "preview": null});
    };
    let (status, progress) = task.status_at(now);
    let progress = progress.filter(|_| state.config.report_progress);
    let mut body =
        json!({"id": id, "status": status, "result": null, "progress": progress, "details": null, "preview": null});
    match (task.is_final(now), &task.outcome) {
        (true, Outcome::Ready) => {
            body["result"] = task.result(&signed_address(state, &task));
            body["cost"] = json!(task.charged());
        }
        (true, _) => body["details"] = task.details(),
        (false, _) => {}
    }
    body
}

pub(super) fn signature(state: &State, id: &str, expires: u64) -> String {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &state.signing_key);
    let tag = ring::hmac::sign(&key, format!("{id}:{expires}").as_bytes());
    tag.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

fn signed_address(state: &State, task: &MockTask) -> String {
    let validity = match task.media {
        Media::Image => state.config.result_url_validity,
        Media::Video => state.config.video_result_url_validity,
    };
    let expires = state
        .clock
        .wall()
        .checked_add(validity)
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map(|d| d.as_secs())
        .unwrap_or(0);
    if let (Ok(mut tasks), Some(until)) = (state.tasks.lock(), state.clock.now().checked_add(validity)) {
        tasks.keep(&task.id, until);
    }
    let ext = if task.format == "jpeg" {
        "jpg"
    } else {
        task.format.as_str()
    };
    format!(
        "{}/mock/results/{}.{ext}?expires={expires}&signature={}",
        state.delivery_url,
        task.id,
        signature(state, &task.id, expires)
    )
}

/// Waits until the task is final on the mock clock; `None` if it is not
/// (or no longer) known.
pub(super) async fn sleep_until_final(state: &State, id: &str) -> Option<MockTask> {
    let task = |state: &State| state.tasks.lock().ok().and_then(|t| t.get(id).cloned());
    state.clock.sleep_until(task(state)?.finished_at()).await;
    task(state)
}
