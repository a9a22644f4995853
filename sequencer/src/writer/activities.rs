//! Starting activities the plan owes: a model call (its request built from the view, sent
//! whole or as what changed) and a tool use on a blocking thread; each reports back to the
//! writer as an input.

use super::*;

impl Session {
    /// Starts what the appended records authorize, and the follow-ups of the pass.
    pub(super) fn start(&mut self, planned: &[RecordBody]) {
        for body in planned {
            match body {
                RecordBody::CallStarted { call, attempt, .. } => self.start_call(call, *attempt),
                RecordBody::ToolStarted { id } => self.start_tool(id),
                RecordBody::ToolCall {
                    id,
                    tier: Tier::Wild,
                    ..
                } => self.ask_review(id),
                _ => {}
            }
        }
        for letter in self.buffer.to_mark.drain(..) {
            let client = self.client.clone();
            tokio::spawn(async move {
                if let Err(e) = client.mark_read(&letter).await {
                    tracing::warn!(letter, error = %e, "could not mark a letter read");
                }
            });
        }
        for carry in std::mem::take(&mut self.buffer.carry) {
            if let Carry::Defer(run) = carry {
                self.start_defer(run);
                continue;
            }
            let (client, tx) = (self.client.clone(), self.tx.clone());
            tokio::spawn(async move {
                if let Err(why) = carry_out(&client, &carry).await {
                    tracing::warn!(?carry, %why, "a hook decision was not carried out");
                    let _closed = tx.send(Input::Note(format!(
                        "your hook's decision was journaled but not carried out: {why}"
                    )));
                }
            });
        }
        for to in self.buffer.rewinds.drain(..) {
            let client = self.client.clone();
            let (forest, agent, grant) =
                (self.forest.clone(), self.agent.clone(), self.grant.clone());
            let tx = self.tx.clone();
            let undo = self.tools.undo();
            tokio::spawn(async move {
                let note = match crate::control::restore_after(
                    &client, &undo, &forest, &agent, &grant, to,
                )
                .await
                {
                    Ok(note) => note,
                    Err(e) => format!("rewind to {to}: restoring failed: {e}"),
                };
                let _closed = tx.send(Input::Note(note));
            });
        }
    }

    pub(super) fn start_call(&mut self, call: &CallId, attempt: u32) {
        let (provider, model, notes) = match (&self.models.fallback, attempt > 1) {
            (Some(fallback), true) => fallback.clone(),
            _ => self.models.primary.clone(),
        };
        let request = self.request(call, model, notes);
        let backoff = match attempt {
            0 | 1 => Duration::ZERO,
            n => Duration::from_millis(self.limits.retry_backoff_ms)
                .saturating_mul(1 << (n - 2).min(6)),
        };
        let tx = self.tx.clone();
        let call_id = call.clone();
        let handle = tokio::spawn(async move {
            if !backoff.is_zero() {
                tokio::time::sleep(backoff).await;
            }
            let outcome = provider.complete(&request).await;
            drop(request);
            let oversized = outcome.as_ref().ok().and_then(|reply| {
                crate::boundary::check_reply(&reply.text, &reply.tool_uses).err()
            });
            if let Some(error) = oversized {
                let _closed = tx.send(Input::Oversized(call_id, error));
                return;
            }
            if let Err(e) = &outcome
                && e.is_context_overflow()
            {
                let _closed = tx.send(Input::Overflow(call_id, e.to_string()));
                return;
            }
            let signal = match outcome {
                Ok(reply) => Signal::ModelReply {
                    call: call_id,
                    text: reply.text,
                    tool_uses: reply.tool_uses,
                    usage: reply.usage,
                    stop_reason: reply.stop_reason,
                },
                Err(e) => Signal::ModelFailed {
                    call: call_id,
                    retryable: e.retryable(),
                    error: e.to_string(),
                },
            };
            let _closed = tx.send(Input::Signal(signal));
        });
        self.running
            .calls
            .insert(call.clone(), handle.abort_handle());
    }

    /// The request for `call`: the previous request's view with only what changed since
    /// copied in (the fold only ever changes its last message or appends, unless a rewind, a
    /// compaction or a new epoch reshaped it), so a turn's cost does not grow with history. The
    /// tools are copied only when they changed, since their schemas are the bulk of a request
    /// with a short conversation.
    pub(super) fn request(
        &mut self,
        call: &CallId,
        model: String,
        notes: Option<String>,
    ) -> Arc<ModelRequest> {
        let view = self.log.fold.view();
        let full = |model: String, notes: Option<String>| {
            Arc::new(ModelRequest {
                model,
                view: view.clone(),
                notes,
                tools: self.specs.clone(),
                max_tokens: self.limits.max_tokens,
                call: call.clone(),
            })
        };
        let request = match self.log.sent.take() {
            Some(mut sent) if !self.log.reshaped => match Arc::get_mut(&mut sent) {
                Some(request) => {
                    let keep =
                        (request.view.messages.len().saturating_sub(1)).min(view.messages.len());
                    request.view.messages.truncate(keep);
                    request
                        .view
                        .messages
                        .extend_from_slice(&view.messages[keep..]);
                    request.view.system.clone_from(&view.system);
                    request.model = model;
                    request.notes = notes;
                    request.call = call.clone();
                    sent
                }
                None => full(model, notes),
            },
            _ => full(model, notes),
        };
        debug_assert_eq!(&request.view, view);
        debug_assert_eq!(request.tools, self.specs);
        self.log.reshaped = false;
        self.log.sent = Some(Arc::clone(&request));
        self.fitted(request)
    }

    /// `request` as sent: when its view is over what the window leaves (a large item the kept
    /// tail holds, a window a provider proved smaller), its largest parts stood in for by stubs
    /// that say how to get them back (core's `fit_view`). The next request is then built whole,
    /// since the one kept to copy from is not what was sent.
    fn fitted(&mut self, request: Arc<ModelRequest>) -> Arc<ModelRequest> {
        let fixed = self.fixed_bytes();
        let budget = self.input_bytes().saturating_sub(fixed);
        if l3m_core::view::view_bytes(&request.view) <= budget {
            return request;
        }
        let view = l3m_core::view::fit_view(&request.view, budget);
        self.gauge.sent_bytes = l3m_core::view::view_bytes(&view) + fixed;
        self.log.reshaped = true;
        tracing::info!(agent = %self.agent, budget, "a request was fitted to the window");
        Arc::new(ModelRequest {
            view,
            ..(*request).clone()
        })
    }

    pub(super) fn start_tool(&mut self, id: &ToolUseId) {
        let Some(use_) = self.log.owed.tool_use(id).cloned() else {
            tracing::warn!(%id, "a started tool use is not in the latest reply");
            return;
        };
        self.running.running_tools.insert(id.clone());
        let tools = Arc::clone(&self.tools);
        let cap = self.models.economy.tool_output_cap;
        let tx = self.tx.clone();
        // Only an approved wild use reaches a start (core's plan starts a wild use only after a
        // safe verdict is journaled).
        let footprint = tools.footprints().get(&use_.name);
        let reviewed = footprint.is_some_and(|f| f.tier() == Tier::Wild);
        // A commit the tool made reaches the hub before its result is journaled.
        let commits = footprint.is_some_and(|f| f.0.contains(&EffectClass::GitWrite));
        let sync = commits.then(|| {
            let acr = crate::acr::Acr::at(&self.forest, &self.agent);
            (acr, self.client.clone(), tokio::runtime::Handle::current())
        });
        // The blocking thread reports to the writer itself: no task in between to wake.
        tokio::task::spawn_blocking(move || {
            let ToolUse { id, name, input } = use_;
            let outcome = if reviewed {
                tools.run_reviewed(&name, input, cap)
            } else {
                tools.run(&name, input, cap)
            };
            let input = match outcome {
                Outcome::Finished {
                    output,
                    is_error,
                    effects,
                    refusal,
                } => Input::Signal(Signal::ToolFinished {
                    id,
                    output,
                    is_error,
                    effects,
                    refusal,
                }),
                Outcome::NeedsReview { card } => Input::NeedsReview(id, card),
            };
            let unsynced =
                sync.and_then(|(acr, client, runtime)| runtime.block_on(acr.sync(&client)).err());
            let _closed = tx.send(input);
            if let Some(error) = unsynced {
                tracing::warn!(%error, "a commit did not reach the hub");
                let _closed = tx.send(Input::Note(format!(
                    "your commit is in your workspace but did not reach the hub ({error}); \
                     it is pushed again after your next commit or at your next boot"
                )));
            }
        });
    }
}

/// Carries out one journaled hook decision through hubd, under the agent's own session (so
/// hubd's gates apply as to any letter or retire the agent asks for).
async fn carry_out(client: &HubClient, carry: &Carry) -> Result<(), String> {
    let address = |to: &l3m_core::names::Entity| match to {
        l3m_core::names::Entity::Agent(a) => {
            Ok(l3m_core::mail::Address::for_agent(a.clone()).render())
        }
        other => Err(format!("{other} has no inbox on this hub")),
    };
    match carry {
        Carry::Reply { to, answered, text } => {
            client.reply(&address(to)?, answered, text).await.map(drop)
        }
        Carry::Forward { to, text } => client
            .send_letter(&address(to)?, Some("forwarded"), text)
            .await
            .map(drop),
        Carry::Retire(child) => client.retire(child).await.map(drop),
        // Run by the writer itself (`Session::start_defer`), never through hubd.
        Carry::Defer(_) => Ok(()),
    }
    .map_err(|e| e.to_string())
}
