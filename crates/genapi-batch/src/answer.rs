//! What the answer to a submission means for its line: one pure function
//! over every error the client can return, so what a run records after a
//! submission that was not accepted is a rule, tested as a table, not a
//! list of cases in the runner.
//!
//! | the answer | what it means | what the run records |
//! |---|---|---|
//! | [`Answer::NoPlace`]: no place under a shared limit | the request never left | nothing; the next run sends it |
//! | [`Answer::NeverLeft`]: refused by the client before sending | nothing was sent | refused, may be sent again |
//! | [`Answer::SafeToResend`]: a 429, a connection never opened | the service surely created nothing | refused, sent again after a pause |
//! | [`Answer::SurelyRefused`]: 400, 402, 403 before a task, 404, 405, 422 | no task was created, and none will be by sending it again as it is | refused for good (sent again when asked) |
//! | [`Answer::Unknown`]: anything else (a 5xx, a lost answer, a layer's failure) | the service may have created and charged a task | unanswered: never sent again on its own |

use genapi::{Checked, Error};

/// What a submission's error says of its line (see the module's table).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Answer {
    /// No place could be taken under a shared limit: the request never
    /// left and nothing is written.
    NoPlace,
    /// The client refused the request before sending it.
    NeverLeft,
    /// The service surely created nothing, and may take it later.
    SafeToResend,
    /// The service answered that it created nothing.
    SurelyRefused,
    /// No answer says what became of it: it may have been charged.
    Unknown,
}

/// What `error`, the outcome of a submission, means for its line.
pub(crate) fn answer_to_a_submission(error: &Error) -> Answer {
    match error {
        Error::SharedLimit { .. } => Answer::NoPlace,
        Error::Validation {
            checked: Checked::Locally,
            ..
        }
        | Error::Input { .. }
        | Error::InvalidArgument { .. }
        | Error::Config(_) => Answer::NeverLeft,
        _ if error.is_safe_to_resubmit() => Answer::SafeToResend,
        Error::Validation {
            checked: Checked::ByService,
            ..
        }
        | Error::InsufficientCredits { .. }
        | Error::Forbidden { task: None, .. } => Answer::SurelyRefused,
        // A request the service could not route or read (a wrong address,
        // an unknown fine-tune): nothing was made, and the same request
        // gets the same answer.
        Error::UnexpectedStatus {
            status: 400 | 404 | 405,
            task: None,
            ..
        } => Answer::SurelyRefused,
        _ => Answer::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use genapi::{Checked, Error, TaskRef};
    use genapi_mock::{Fault, FaultKind};

    use super::*;

    /// The answer's words, as the table of docs/batch-rules.md shows them.
    fn words(answer: Answer) -> &'static str {
        match answer {
            Answer::NoPlace => "no place: nothing recorded, sent by the next run",
            Answer::NeverLeft => "never left: refused, may be sent again",
            Answer::SafeToResend => "surely nothing created: sent again after a pause",
            Answer::SurelyRefused => "refused for good: sent again when asked",
            Answer::Unknown => "unknown: never sent again on its own",
        }
    }

    fn task() -> TaskRef {
        TaskRef {
            id: "t".into(),
            polling_url: "https://api.example.com/v1/get_result?id=t".into(),
        }
    }

    fn validation(checked: Checked) -> Error {
        Error::Validation {
            errors: Vec::new(),
            checked,
        }
    }

    /// Two network errors as the client makes them: a connection never
    /// opened (a closed port), and an answer lost after the mock took the
    /// submission.
    async fn network_errors() -> (Error, Error) {
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = closed.local_addr().unwrap().port();
        drop(closed);
        let client = genapi::Client::builder()
            .api_key("k")
            .base_url(format!("http://127.0.0.1:{port}"))
            .build()
            .unwrap();
        let body = serde_json::json!({"prompt": "a fox"});
        let never_opened = client.submit_raw("/v1/gen-2-pro", body.clone()).await.unwrap_err();
        let mock = genapi_mock::MockService::start().await.unwrap();
        mock.inject(Fault::on("/v1/gen-2-pro", FaultKind::LoseAnswer).method("POST"));
        let lost = mock
            .client()
            .unwrap()
            .submit_raw("/v1/gen-2-pro", body)
            .await
            .unwrap_err();
        (never_opened, lost)
    }

    /// The error of a submission the service answered with `status` (its
    /// own body for it).
    async fn answered(status: u16) -> Error {
        let mock = genapi_mock::MockService::start().await.unwrap();
        mock.inject(Fault::status("/v1/gen-2-pro", status).method("POST"));
        let body = serde_json::json!({"prompt": "a fox"});
        mock.client()
            .unwrap()
            .submit_raw("/v1/gen-2-pro", body)
            .await
            .unwrap_err()
    }

    /// Every error a submission can end in, by name, with what it means.
    #[tokio::test]
    #[expect(clippy::too_many_lines, reason = "one scenario, told from start to end")]
    async fn every_error_of_a_submission_means_one_thing() {
        let (never_opened, lost) = network_errors().await;
        let status = |status: u16| Error::Server {
            status,
            message: String::new(),
            task: None,
        };
        let table: Vec<(&str, Error, Answer)> = vec![
            (
                "no place under a shared limit",
                Error::SharedLimit { reason: String::new() },
                Answer::NoPlace,
            ),
            (
                "invalid, found by the client",
                validation(Checked::Locally),
                Answer::NeverLeft,
            ),
            (
                "an input file that cannot be read",
                Error::Input {
                    source_name: "a.png".into(),
                    message: String::new(),
                },
                Answer::NeverLeft,
            ),
            (
                "an invalid argument",
                Error::InvalidArgument {
                    argument: "width",
                    problem: String::new(),
                },
                Answer::NeverLeft,
            ),
            (
                "a configuration refused",
                Error::Config(String::new()),
                Answer::NeverLeft,
            ),
            (
                "429",
                Error::RateLimited {
                    retry_after: Some(Duration::from_secs(1)),
                    message: String::new(),
                    task: None,
                },
                Answer::SafeToResend,
            ),
            ("a connection never opened", never_opened, Answer::SafeToResend),
            (
                "422 from the service",
                validation(Checked::ByService),
                Answer::SurelyRefused,
            ),
            (
                "402",
                Error::InsufficientCredits { message: String::new() },
                Answer::SurelyRefused,
            ),
            (
                "403",
                Error::Forbidden {
                    message: String::new(),
                    key_origin: String::new(),
                    task: None,
                },
                Answer::SurelyRefused,
            ),
            ("400 from the service", answered(400).await, Answer::SurelyRefused),
            ("404 from the service", answered(404).await, Answer::SurelyRefused),
            ("an answer lost after the request left", lost, Answer::Unknown),
            ("500", status(500), Answer::Unknown),
            ("502", status(502), Answer::Unknown),
            ("503", status(503), Answer::Unknown),
            (
                "an unexpected status",
                Error::UnexpectedStatus {
                    status: 418,
                    operation: "gen_2_pro".into(),
                    message: String::new(),
                    task: None,
                },
                Answer::Unknown,
            ),
            (
                "a layer's failure",
                Error::Layer {
                    operation: "gen_2_pro".into(),
                    source: genapi::LayerError::new("broke"),
                    task: None,
                },
                Answer::Unknown,
            ),
            (
                "an answer that cannot be read",
                Error::Decode {
                    operation: "gen_2_pro".into(),
                    message: String::new(),
                    body: String::new(),
                    task: None,
                },
                Answer::Unknown,
            ),
            (
                "an answer too large",
                Error::TooLarge {
                    operation: "gen_2_pro".into(),
                    limit: 1,
                    task: None,
                },
                Answer::Unknown,
            ),
            (
                "a redirect",
                Error::Redirected {
                    operation: "gen_2_pro".into(),
                    location: String::new(),
                    task: None,
                },
                Answer::Unknown,
            ),
            (
                "403 on a task",
                Error::Forbidden {
                    message: String::new(),
                    key_origin: String::new(),
                    task: Some(task()),
                },
                Answer::Unknown,
            ),
            (
                "429 on a task",
                Error::RateLimited {
                    retry_after: None,
                    message: String::new(),
                    task: Some(task()),
                },
                Answer::Unknown,
            ),
        ];
        for (name, error, meant) in &table {
            assert_eq!(answer_to_a_submission(error), *meant, "{name}: {error}");
        }
        // docs/batch-rules.md shows the table as it is here.
        let mut shown = String::from("| a submission's error | what the run takes it for |\n|---|---|\n");
        for (name, _, meant) in &table {
            shown.push_str(&format!("| {name} | {} |\n", words(*meant)));
        }
        let docs = include_str!("../../../docs/batch-rules.md");
        assert!(
            docs.contains(&shown),
            "docs/batch-rules.md must hold the table of what an answer means:\n{shown}"
        );
    }
}
