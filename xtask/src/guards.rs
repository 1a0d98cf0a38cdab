//! The guards of paying once, each with the test that fails without it.
//!
//! A guard is a condition, a lock or an arm that `docs/batch-rules.md` relies on:
//! a line of `decide`, of what an answer to a submission means, of the
//! identity of jobs, of the price rule, or of the ledger's SQL. Each is
//! listed here once, with a mutation (the guard weakened the way a careless
//! change would) and the test that must fail when the mutation is applied.
//! `cargo xtask guards` applies each mutation in turn, runs its test, and
//! puts the file back: a mutation whose test still passes is a guard no
//! test holds. It is a script, not part of the test command (each mutation
//! costs a build); the unit test below keeps the list in step with the code
//! (each mutation's text is found once in its file).

/// One guard: where it is, how it is weakened, and what must catch it.
#[derive(Debug, Clone, Copy)]
pub struct Guard {
    /// A short name.
    pub name: &'static str,
    /// What it keeps from happening.
    pub why: &'static str,
    /// The file, from the workspace's root.
    pub file: &'static str,
    /// The guard's text, found exactly once in the file.
    pub find: &'static str,
    /// What the mutation puts in its place.
    pub replace: &'static str,
    /// The cargo test that must fail: package, test target (`--lib` for
    /// the unit tests) and name filter.
    pub test: (&'static str, &'static str, &'static str),
}

/// Every guard, in the order of the rules they keep.
pub const GUARDS: &[Guard] = &[
    Guard {
        name: "decide: a changed job is refused",
        why: "a line whose job changed since it may have made a task is not sent for the new job",
        file: "crates/genapi-batch/src/decide.rs",
        find: "if seen.changed && line.may_hold_a_task() {",
        replace: "if false && seen.changed && line.may_hold_a_task() {",
        test: ("genapi-batch", "--lib", "decide"),
    },
    Guard {
        name: "decide: a moved job is refused",
        why: "a job recorded under another line is never sent for its new line",
        file: "crates/genapi-batch/src/decide.rs",
        find: "    if seen.moved {\n        return Action::RefuseMoved;",
        replace: "    if false && seen.moved {\n        return Action::RefuseMoved;",
        test: ("genapi-batch", "--lib", "decide"),
    },
    Guard {
        name: "decide: a refusal is sent again only with --retry-refused",
        why: "the flag for refusals does not send unanswered lines, nor the other way round",
        file: "crates/genapi-batch/src/decide.rs",
        find: "() if !seen.changed && !asked.retry_refused => return Action::Report,",
        replace: "() if !seen.changed && !asked.resubmit_unknown => return Action::Report,",
        test: ("genapi-batch", "--lib", "decide"),
    },
    Guard {
        name: "decide: an unanswered line is sent again only with --resubmit-unknown",
        why: "a submission that may have made a task is not paid again unasked",
        file: "crates/genapi-batch/src/decide.rs",
        find: "        if !asked.resubmit_unknown || sent.digest.is_none() {",
        replace: "        if !asked.retry_refused || sent.digest.is_none() {",
        test: ("genapi-batch", "--lib", "decide"),
    },
    Guard {
        name: "decide: a record that cannot be read is never sent again",
        why: "a new intent would replace the claim of a record that may be another job's paid task",
        file: "crates/genapi-batch/src/decide.rs",
        find: "        if !asked.resubmit_unknown || sent.digest.is_none() {",
        replace: "        if !asked.resubmit_unknown {",
        test: ("genapi-batch", "batch", "an_unreadable_record_is_not_sent_again"),
    },
    Guard {
        name: "decide: an accepted line is polled",
        why: "a task accepted in an earlier run is polled, never submitted again",
        file: "crates/genapi-batch/src/decide.rs",
        find: "    if let Line::Accepted { .. } = line {\n        return polled(seen);\n    }",
        replace: "    if let Line::Accepted { .. } = line {\n        let _ = polled(seen);\n    }",
        test: ("genapi-batch", "--lib", "decide"),
    },
    Guard {
        name: "identity: a damaged record is a claim of any job",
        why: "a journal line that cannot be read may be any job's paid intent",
        file: "crates/genapi-batch/src/identity.rs",
        find: "None => claims.unreadable.push(number),",
        replace: "None => {}",
        test: (
            "genapi-batch",
            "batch",
            "edited_job_files::a_record_that_cannot_be_read",
        ),
    },
    Guard {
        name: "identity: a refused line holds no claim",
        why: "a line the service refused made no task, so its job may be sent elsewhere",
        file: "crates/genapi-batch/src/line.rs",
        find: "!matches!(self, Line::Unsent { .. }) && !self.refused()",
        replace: "!matches!(self, Line::Unsent { .. })",
        test: ("genapi-batch", "batch", "edited_job_files"),
    },
    Guard {
        name: "runner: a line waiting for the file keeps its history",
        why: "a journal hands a line's history out once: lost, an unanswered line would be sent as new",
        file: "crates/genapi-batch/src/run.rs",
        find: "kept.insert(line, history);",
        replace: "let _ = (kept, history);",
        test: ("genapi-batch", "batch", "edited_job_files::an_unanswered_line_with_a_copy"),
    },
    Guard {
        name: "answer: a 5xx to a submission is unknown",
        why: "an answer that does not say nothing was made is never taken for a refusal",
        file: "crates/genapi-batch/src/answer.rs",
        find: "| Error::Forbidden { task: None, .. } => Answer::SurelyRefused,\n        _ => Answer::Unknown,",
        replace: "| Error::Forbidden { task: None, .. } => Answer::SurelyRefused,\n        _ => Answer::SurelyRefused,",
        test: ("genapi-batch", "--lib", "answer"),
    },
    Guard {
        name: "cap: a settled cost is a plausible price",
        why: "an end at no price (or a hostile one) leaves the line's hold counted",
        file: "crates/genapi-batch/src/cap.rs",
        find: "plausible(credits).then_some(SettledCost(credits))",
        replace: "Some(SettledCost(credits))",
        test: ("genapi-batch", "batch", "store_contract"),
    },
    Guard {
        name: "journal: an intent only for a line the run holds",
        why: "a journal writes an intent (and the request leaves) only for a line claimed and not given back",
        file: "crates/genapi-batch/src/store.rs",
        find: "if matches!(event, Event::Intent { .. }) && !self.held.lock()",
        replace: "if false && matches!(event, Event::Intent { .. }) && !self.held.lock()",
        test: ("genapi-batch", "batch", "store_contract"),
    },
    Guard {
        name: "ledger: an intent only from the line's worker",
        why: "a worker whose line another took cannot store an intent (and send) for it",
        file: "crates/genapi-ledger/src/lines.rs",
        find: "WHERE batch = $1 AND line = $2 AND worker = $3\n         AND lease_until > clock_timestamp()",
        replace: "WHERE batch = $1 AND line = $2\n         AND lease_until > clock_timestamp()",
        test: (
            "genapi-ledger",
            "ledger",
            "fenced_intents::an_intent_on_a_line_another_worker_took",
        ),
    },
    Guard {
        name: "ledger: an intent needs a live lease",
        why: "a worker whose lease lapsed sends nothing on it",
        file: "crates/genapi-ledger/src/lines.rs",
        find: "AND lease_until > clock_timestamp() + make_interval(secs => $5)",
        replace: "AND $5::float8 IS NOT NULL",
        test: ("genapi-ledger", "ledger", "fenced_intents::an_intent_renews_a_live_lease"),
    },
    Guard {
        name: "ledger: an intent renews the lease",
        why: "the request leaves with a whole lease ahead, so no one takes the line while it is on its way",
        file: "crates/genapi-ledger/src/lines.rs",
        find: "SET lease_until = greatest(lease_until, clock_timestamp() + make_interval(secs => $6))",
        replace: "SET lease_until = greatest(lease_until, clock_timestamp() + make_interval(secs => $6 * 0))",
        test: ("genapi-ledger", "ledger", "fenced_intents::an_intent_renews_a_live_lease"),
    },
    Guard {
        name: "ledger: an intent is fenced by the line's row",
        why: "a claim made while an intent is in flight waits for it and sees it",
        file: "crates/genapi-ledger/src/lines.rs",
        find: "UPDATE genapi_lines\n       SET lease_until = greatest(lease_until, clock_timestamp() + make_interval(secs => $6))\n       WHERE batch = $1 AND line = $2 AND worker = $3\n         AND lease_until > clock_timestamp() + make_interval(secs => $5)\n       RETURNING line)",
        replace: "SELECT line FROM genapi_lines\n       WHERE batch = $1 AND line = $2 AND worker = $3\n         AND lease_until > clock_timestamp() + make_interval(secs => $5) AND $6::float8 IS NOT NULL)",
        test: ("genapi-ledger", "ledger", "fenced_intents::a_claim_made_while_an_intent"),
    },
    Guard {
        name: "ledger: holds of a batch are taken one at a time",
        why: "two workers' holds at once never pass the cap",
        file: "crates/genapi-ledger/src/lines.rs",
        find: "\"SELECT pg_advisory_xact_lock(hashtextextended($1, 7))\"",
        replace: "\"SELECT hashtextextended($1, 7)\"",
        test: ("genapi-ledger", "ledger", "fenced_intents::holds_of_two_workers"),
    },
    Guard {
        name: "ledger: a live lease keeps a line its worker's (one claim)",
        why: "two workers never hold one line at once",
        file: "crates/genapi-ledger/src/lines.rs",
        find: "WHERE NOT l.done AND (l.worker IS NULL OR l.worker = $3 OR l.lease_until < now())",
        replace: "WHERE NOT l.done AND (l.worker IS NULL OR l.worker = $3 OR l.lease_until IS NOT NULL)",
        test: ("genapi-ledger", "ledger", "store_contract"),
    },
    Guard {
        name: "ledger: a live lease keeps a line its worker's (many claims)",
        why: "two workers never hold one line at once",
        file: "crates/genapi-ledger/src/lines.rs",
        find: "AND (l.worker IS NULL OR l.worker = $3 OR l.lease_until < now())\n                           FOR UPDATE SKIP LOCKED",
        replace: "AND (l.worker IS NULL OR l.worker = $3 OR l.lease_until IS NOT NULL)\n                           FOR UPDATE SKIP LOCKED",
        test: ("genapi-ledger", "ledger", "store_contract"),
    },
    Guard {
        name: "shared records: a record is made once",
        why: "of two proxies sending the same job at once, one sends it",
        file: "crates/genapi-ledger/src/records.rs",
        find: "     WHERE r.kept_until <= now()\";",
        replace: "\";",
        test: ("genapi-ledger", "ledger", "shared_records::a_record_is_made_once"),
    },
    Guard {
        name: "shared records: a change lands only on the version read",
        why: "a decision made on a record another proxy changed meanwhile is made again",
        file: "crates/genapi-ledger/src/records.rs",
        find: "WHERE scope = $1 AND key = $2 AND version = $3 AND kept_until > now()",
        replace: "WHERE scope = $1 AND key = $2 AND $3::bigint IS NOT NULL AND kept_until > now()",
        test: ("genapi-ledger", "ledger", "shared_records::a_record_is_made_once"),
    },
    Guard {
        name: "shared records: a record past its keeping is not changed",
        why: "a day-old record is made anew, never changed on an old reading",
        file: "crates/genapi-ledger/src/records.rs",
        find: "WHERE scope = $1 AND key = $2 AND version = $3 AND kept_until > now()",
        replace: "WHERE scope = $1 AND key = $2 AND version = $3",
        test: ("genapi-ledger", "ledger", "shared_records::a_record_past_its_keeping"),
    },
    Guard {
        name: "shared records: only its holder changes a held record",
        why: "a proxy's late word never lands on a submission another proxy took over",
        file: "crates/genapi-ledger/src/records.rs",
        find: "WHERE scope = $1 AND key = $2 AND holder = $3 AND kept_until > now()",
        replace: "WHERE scope = $1 AND key = $2 AND $3::text IS NOT NULL AND kept_until > now()",
        test: ("genapi-ledger", "ledger", "shared_records::only_its_holder"),
    },
    Guard {
        name: "shared records: only its holder removes a held record",
        why: "a refusal one proxy heard never forgets a job another proxy sent",
        file: "crates/genapi-ledger/src/records.rs",
        find: "DELETE FROM genapi_shared_records WHERE scope = $1 AND key = $2 AND holder = $3",
        replace: "DELETE FROM genapi_shared_records WHERE scope = $1 AND key = $2 AND $3::text IS NOT NULL",
        test: ("genapi-ledger", "ledger", "shared_records::only_its_holder"),
    },
    Guard {
        name: "shared records: a record past its keeping is gone",
        why: "a submission remembered a day ago is forgotten, as a memory file forgets it",
        file: "crates/genapi-ledger/src/records.rs",
        find: "WHERE scope = $1 AND key = $2 AND kept_until > now()\";",
        replace: "WHERE scope = $1 AND key = $2\";",
        test: ("genapi-ledger", "ledger", "shared_records::a_record_past_its_keeping"),
    },
    Guard {
        name: "shared records: records past their keeping are removed",
        why: "the shared memory does not grow for ever",
        file: "crates/genapi-ledger/src/records.rs",
        find: "DELETE FROM genapi_shared_records WHERE scope = $1 AND kept_until <= now()",
        replace: "DELETE FROM genapi_shared_records WHERE scope = $1 AND false",
        test: ("genapi-ledger", "ledger", "shared_records::a_record_past_its_keeping"),
    },
    Guard {
        name: "shared records: a hold lapses",
        why: "a dead proxy's submission reads as its holder gone, never waited on for ever",
        file: "crates/genapi-ledger/src/records.rs",
        find: "coalesce(lease_until > now(), false)",
        replace: "true",
        test: ("genapi-ledger", "ledger", "shared_records::only_its_holder"),
    },
    Guard {
        name: "proxy: a lapsed hold is read as its holder gone",
        why: "a submission a dead proxy sent is refused as unknown, never waited on nor sent again",
        file: "crates/genapi-proxy/src/memory_shared.rs",
        find: "    if !record.held {",
        replace: "    if false && !record.held {",
        test: ("genapi-proxy", "proxy", "sharing::a_submission_whose_proxy_died"),
    },
    Guard {
        name: "proxy: the origins one proxy hands out are shared",
        why: "a poll or download of an address one proxy handed out works at every proxy",
        file: "crates/genapi-proxy/src/memory_shared.rs",
        find: "        for origin in learnt {",
        replace: "        for origin in learnt.into_iter().filter(|_| false) {",
        test: ("genapi-proxy", "proxy", "sharing::an_address_one_proxy"),
    },
    Guard {
        name: "proxy: a holder's word is written on the version read",
        why: "a submission's acceptance is never written over by its caller's going away, read before it",
        file: "crates/genapi-proxy/src/memory_shared.rs",
        find: "self.records.replace(key, record.version, &value_of(&entry), hold).await",
        replace: "self.records.update_held(key, &claim.holder, &value_of(&entry), hold).await",
        test: ("genapi-proxy", "--lib", "a_word_written_over_a_stale_reading"),
    },
    Guard {
        name: "proxy: a claim's own write is its own",
        why: "a claim whose write landed unseen sends, rather than waiting on itself and refusing the job for a day",
        file: "crates/genapi-proxy/src/memory_shared.rs",
        find: "            if record.as_ref().and_then(|r| r.holder.as_deref()) == Some(claim.holder.as_str()) {",
        replace: "            if false && record.as_ref().and_then(|r| r.holder.as_deref()) == Some(claim.holder.as_str()) {",
        test: ("genapi-proxy", "--lib", "a_claim_whose_write_landed_unseen"),
    },
    Guard {
        name: "proxy: a memory file that cannot be written sends nothing",
        why: "a submission is sent only once remembered where a restart finds it",
        file: "crates/genapi-proxy/src/memory_local.rs",
        find: "                    if let Err(why) = self.write() {",
        replace: "                    if let Err(why) = self.write().and(Err::<(), String>(String::new())).or(Ok::<(), String>(())) {",
        test: ("genapi-proxy", "--lib", "a_memory_that_cannot_be_written"),
    },
    Guard {
        name: "proxy: a claim that waits wakes no one",
        why: "a caller waiting on an identical submission waits for its change, not in a busy loop",
        file: "crates/genapi-proxy/src/memory.rs",
        find: "            Claimed::Send(_) | Claimed::Replay(..) | Claimed::Unavailable(_)\n",
        replace: "            _\n",
        test: ("genapi-proxy", "--lib", "a_claim_that_waits_wakes_no_one"),
    },
    Guard {
        name: "batch: a paid job's copies are counted, not found",
        why: "a job sent twice, one copy retyped as it moved, is not paid a third time",
        file: "crates/genapi-batch/src/identity.rs",
        find: "            if held(claimed) >= numbers.len() {",
        replace: "            if held(claimed) >= 1 {",
        test: ("genapi-batch", "batch", "edited_job_files::a_copy_edited_as_it_moved"),
    },
    Guard {
        name: "batch: a job new to the store waits while a paid job is in too few lines",
        why: "a job edited as it moved (retyped, an image saved again) is not paid again",
        file: "crates/genapi-batch/src/identity.rs",
        find: "            .or_else(|| self.edited_away(digest, held, file_read))",
        replace: "            .or_else(|| self.edited_away(digest, held, file_read).filter(|_| false))",
        test: ("genapi-batch", "batch", "edited_job_files::a_job_edited_as_it_moved"),
    },
    Guard {
        name: "batch: a ledger run holds its folder against a journal run",
        why: "a journal run and a ledger run started in one new folder at once do not both pay",
        file: "crates/genapi-cli/src/batch/folder.rs",
        find: "        match folder.try_lock_shared() {",
        replace: "        match Ok::<(), std::fs::TryLockError>(()) {",
        test: ("genapi-cli", "command", "ledger_hardening::a_folder_held_by_another_run"),
    },
    Guard {
        name: "batch: ledger runs check and mark a folder one at a time",
        why: "two ledger batches started in one new folder at once do not both find it unmarked",
        file: "crates/genapi-cli/src/batch/folder.rs",
        find: "        match lock.try_lock() {",
        replace: "        match Ok::<(), std::fs::TryLockError>(()) {",
        test: ("genapi-cli", "command", "ledger_hardening::a_folder_held_by_another_run"),
    },
    Guard {
        name: "batch: a folder's mark names the ledger database",
        why: "the same batch name in another database, however its address is spelt, pays nothing again",
        file: "crates/genapi-cli/src/batch/keeper.rs",
        find: "        Some(found_id) => found_id != id,",
        replace: "        Some(found_id) => found_id != id && false,",
        test: ("genapi-cli", "command", "ledger_hardening::a_folder_is_never_run"),
    },
    Guard {
        name: "ledger folder: another batch is refused, finished or not",
        why: "a copy of a finished batch's job file, renamed or edited, would pay again for every job they share",
        file: "crates/genapi-cli/src/batch/keeper.rs",
        find: "    if !(other_batch || other_database) {",
        replace: "    if !(other_batch || other_database) || super::results::lines_in_flight(out_dir).is_some_and(|l| l.is_empty()) {",
        test: ("genapi-cli", "command", "an_edited_copy_of_a_finished_batch_is_refused"),
    },
    Guard {
        name: "run: a request leaves only once its intent is written",
        why: "a submission the store holds no intent of is paid again by the next run",
        file: "crates/genapi-batch/src/run.rs",
        find: "        if let Err(e) = self.record(recorded).await {",
        replace: "        if let (Err(e), false) = (self.record(recorded).await, true) {",
        test: ("genapi-batch", "batch", "a_submission_whose_intent_cannot_be_written_is_not_sent"),
    },
    Guard {
        name: "fold: a new intent keeps the line's task",
        why: "a task the service accepted is paid; forgetting it lets the line be sent again",
        file: "crates/genapi-batch/src/line.rs",
        find: "                    Some(task) => Line::Accepted { sent: Some(sent), task },",
        replace: "                    Some(_) => Line::Unanswered { sent },",
        test: ("genapi-batch", "--lib", "a_task_once_folded_is_never_forgotten"),
    },
    Guard {
        name: "fold: a late refusal leaves an accepted line as it is",
        why: "a refusal says nothing of a task already accepted for the line",
        file: "crates/genapi-batch/src/line.rs",
        find: "                Line::Unanswered { sent } => Line::Unsent { tried: Some(sent) },",
        replace: "                Line::Unanswered { sent } | Line::Accepted { sent: Some(sent), .. } => Line::Unsent { tried: Some(sent) },",
        test: ("genapi-batch", "--lib", "a_task_once_folded_is_never_forgotten"),
    },
    Guard {
        name: "batch: a damaged record claims any job but after its job's intent",
        why: "a record that may be another job's intent is never filed under the refused one",
        file: "crates/genapi-batch/src/line.rs",
        find: "            Line::Unanswered { sent } if sent.sent_at.is_some() => Sent { sent_at: None, ..sent },",
        replace: "            Line::Unanswered { sent } => Sent { sent_at: None, ..sent },\n            Line::Unsent { tried: Some(sent) } => sent,",
        test: ("genapi-batch", "--lib", "a_record_that_cannot_be_read_keeps_a_job_only"),
    },
    Guard {
        name: "proxy: a stop waits for the deliveries it writes",
        why: "a process that exits after a stop leaves no received acceptance looking owed",
        file: "crates/genapi-proxy/src/lib.rs",
        find: "        let _ = tokio::time::timeout_at(until, self.shared.memory.settled()).await;",
        replace: "        let _ = tokio::time::timeout_at(until, std::future::ready(())).await;",
        test: ("genapi-proxy", "proxy", "sharing::a_stop_returns_once_the_deliveries"),
    },
    Guard {
        name: "proxy: an Idempotency-Key is its bytes",
        why: "a key beyond ASCII names one job, never falling back to the body",
        file: "crates/genapi-proxy/src/exchange.rs",
        find: "        .map(HeaderValue::as_bytes)\n",
        replace: "        .and_then(|value| value.to_str().ok())\n        .map(str::as_bytes)\n",
        test: ("genapi-proxy", "proxy", "paying_once::an_idempotency_key_seen_before"),
    },
    Guard {
        name: "proxy: a key no service could read is refused",
        why: "a caller's key is never replaced by the proxy's, another account paying",
        file: "crates/genapi-proxy/src/exchange.rs",
        find: "        .is_some_and(|key| key.to_str().is_err())",
        replace: "        .is_some_and(|key| key.to_str().is_err() && false)",
        test: ("genapi-proxy", "proxy", "refusing::a_key_no_service_could_read"),
    },
    Guard {
        name: "proxy: a success that names no task may hold one",
        why: "a retry of a submission answered with no task id is never sent again",
        file: "crates/genapi-proxy/src/remembered.rs",
        find: "        (200..300).contains(&self.status) && self.task_id().is_some()",
        replace: "        (200..300).contains(&self.status)",
        test: ("genapi-proxy", "proxy", "refusing::a_success_that_names_no_task"),
    },
    Guard {
        name: "proxy: one memory per base URL",
        why: "a restart that gives the trusted origins another way finds what was remembered",
        file: "crates/genapi-cli/src/proxy.rs",
        find: "        .map(|base| crate::address_key(&base.value))",
        replace: "        .map(|base| crate::address_key(&base.value) + &global.settings.service_addresses())",
        test: ("genapi-cli", "command", "proxying::a_retry_after_the_sdk_gave_up"),
    },
    Guard {
        name: "proxy: --status follows no redirect",
        why: "the proxy's own key goes nowhere an answer points",
        file: "crates/genapi-cli/src/proxy.rs",
        find: "                .redirect(genapi::reqwest::redirect::Policy::none())\n",
        replace: "",
        test: ("genapi-cli", "command", "proxying::the_status_sends_the_proxys_key"),
    },
    Guard {
        name: "proxy: a memory file never passes what a start reads back",
        why: "a full memory sends nothing new rather than losing every acceptance it owes",
        file: "crates/genapi-proxy/src/memory_local.rs",
        find: "        if bytes.len() as u64 > self.most_bytes {",
        replace: "        if false && bytes.len() as u64 > self.most_bytes {",
        test: ("genapi-proxy", "--lib", "a_full_memory_sends_nothing_new"),
    },
    Guard {
        name: "proxy: a day-old entry is forgotten as the proxy runs",
        why: "a full memory makes room again without a restart",
        file: "crates/genapi-proxy/src/memory_local.rs",
        find: "            kept.entries.retain(|_, entry| entry.sent_at + KEPT_FOR.as_secs() > now);\n            kept.version += 1;",
        replace: "            kept.version += 1;",
        test: ("genapi-proxy", "--lib", "a_full_memory_sends_nothing_new"),
    },
    Guard {
        name: "proxy: a memory file and a ledger never remember one service at once",
        why: "what a proxy remembering in one sent, a proxy remembering in the other would pay for again",
        file: "crates/genapi-proxy/src/memory_local.rs",
        find: "    file.try_lock_shared().map_err(|_| {",
        replace: "    Ok::<(), std::fs::TryLockError>(()).map_err(|_| {",
        test: ("genapi-proxy", "proxy", "sharing::a_memory_file_and_a_ledger"),
    },
    Guard {
        name: "proxy: an answer of a host sent the key is searched as it streams",
        why: "a host the key goes to cannot hand it on in an image, however large",
        file: "crates/genapi-proxy/src/exchange.rs",
        find: "        let forms = (from_the_service && !shared.key_forms.is_empty()).then(|| shared.key_forms.clone());",
        replace: "        let forms = None;",
        test: ("genapi-proxy", "proxy", "refusing::the_key_quoted_escaped_or_compressed"),
    },
    Guard {
        name: "proxy: a file proxy waits a day after the ledger took a submission",
        why: "a proxy that lost its --ledger does not pay again for what the ledger remembers",
        file: "crates/genapi-proxy/src/memory_local.rs",
        find: "            refuse_beside_a_ledgers_memory(path)?;",
        replace: "            let _ = path;",
        test: ("genapi-proxy", "proxy", "sharing::a_memory_file_and_a_ledger"),
    },
    Guard {
        name: "proxy: one service is one shared memory",
        why: "proxies whose base URLs differ by a slash remember together",
        file: "crates/genapi-proxy/src/memory.rs",
        find: "        text.trim_end_matches('/').to_string()",
        replace: "        text.to_string()",
        test: ("genapi-proxy", "--lib", "one_service_is_one_shared_memory"),
    },
    Guard {
        name: "proxy: the key is searched in its every spelling",
        why: "a key quoted as base64, UTF-16 or HTML references never reaches a caller",
        file: "crates/genapi-proxy/src/lib.rs",
        find: "        key_forms::redacted(&body, &self.key_forms).unwrap_or(body)",
        replace: "        body",
        test: ("genapi-proxy", "proxy", "refusing::the_key_quoted_escaped_or_compressed"),
    },
    Guard {
        name: "proxy: a request's head arrives within its bound",
        why: "a caller sending its head a byte at a time holds no connection for ever",
        file: "crates/genapi-proxy/src/serving.rs",
        find: "                .timer(hyper_util::rt::TokioTimer::new())\n",
        replace: "",
        test: ("genapi-proxy", "proxy", "refusing::a_caller_that_never_finishes_its_head"),
    },
    Guard {
        name: "proxy: so many connections at once",
        why: "a caller past the bound is told at once, and cannot hold every descriptor",
        file: "crates/genapi-proxy/src/serving.rs",
        find: "        let Ok(permit) = permits.clone().try_acquire_owned() else {",
        replace: "        let Ok(permit) = permits.clone().try_acquire_many_owned(0) else {",
        test: ("genapi-proxy", "proxy", "refusing::a_connection_past_the_bound"),
    },
    Guard {
        name: "proxy: the key is searched in every string of a JSON answer",
        why: "a service quoting the key with JSON escapes never hands it to a caller",
        file: "crates/genapi-proxy/src/lib.rs",
        find: "redact_strings(&mut value, key)",
        replace: "(redact_strings(&mut value, key) && false)",
        test: ("genapi-proxy", "proxy", "refusing::the_key_quoted_escaped_or_compressed"),
    },
    Guard {
        name: "proxy: an answer that came compressed is not passed on",
        why: "an answer the proxy cannot search for the key never reaches a caller",
        file: "crates/genapi-proxy/src/exchange.rs",
        find: "        .is_some_and(|coding| !coding.as_bytes().eq_ignore_ascii_case(b\"identity\"))",
        replace: "        .is_some_and(|coding| coding.is_empty())",
        test: ("genapi-proxy", "proxy", "refusing::the_key_quoted_escaped_or_compressed"),
    },
];

#[cfg(test)]
mod tests {
    use super::GUARDS;

    /// Each mutation's text is in its file once, so the list follows the
    /// code: a guard moved or rewritten fails here, not silently in the
    /// script.
    #[test]
    fn every_guard_is_found_once_where_the_list_says() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        for guard in GUARDS {
            let text = std::fs::read_to_string(root.join(guard.file)).unwrap();
            assert_eq!(text.matches(guard.find).count(), 1, "{}: {}", guard.name, guard.file);
            assert_ne!(guard.find, guard.replace, "{}", guard.name);
        }
    }
}
