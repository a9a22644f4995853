//! The session's [`HubOutlet`]: how the ring's mail and spawn tools reach hubd.
//!
//! The ring checks the agent's tokens first (an uncovered address or a spawn level of `off`
//! never gets here); hubd then runs the real gates again. Tool bodies run on a blocking thread,
//! so the outlet enters the runtime with `Handle::block_on` for the one hubd call it makes.

use l3m_core::grant::SpawnRequest;
use l3m_core::mail::Address;
use l3m_ring::effects::{HubOutlet, OutletError};
use l3m_wire::client::{ClientError, HubClient};
use tokio::runtime::Handle;

/// Mail and spawn for one session, over its own hubd client.
#[derive(Debug, Clone)]
pub struct SessionOutlet {
    client: HubClient,
    runtime: Handle,
}

impl SessionOutlet {
    /// An outlet that sends with `client` on `runtime` (the session's runtime).
    pub fn new(client: HubClient, runtime: Handle) -> SessionOutlet {
        SessionOutlet { client, runtime }
    }
}

fn outlet_error(error: ClientError) -> OutletError {
    match error {
        ClientError::Refused { error, .. } => OutletError::Refused {
            code: error.code.as_str().to_owned(),
            reason: error.message,
            axis: error.axis,
        },
        other => OutletError::Unreachable {
            reason: other.to_string(),
        },
    }
}

impl HubOutlet for SessionOutlet {
    fn send_letter(
        &self,
        to: &Address,
        subject: Option<&str>,
        body: &str,
    ) -> Result<String, OutletError> {
        // A letter for another hub is staged on the agent's outbox for the postman; hubd
        // checks the airmail axis there.
        let to_text = to.to_string();
        let letter = if to.office().is_some() {
            self.runtime
                .block_on(self.client.stage_airmail(&to_text, subject, body))
                .map_err(outlet_error)?
                .letter
        } else {
            self.runtime
                .block_on(self.client.send_letter(&to_text, subject, body))
                .map_err(outlet_error)?
                .letter
        };
        Ok(letter)
    }

    fn spawn(&self, request: &SpawnRequest, task: &str) -> Result<String, OutletError> {
        self.runtime.block_on(async {
            let spawned = self
                .client
                .spawn(request.clone())
                .await
                .map_err(outlet_error)?;
            if !task.trim().is_empty() {
                // The task is the child's first letter: it wakes the child, and it is durable
                // in the child's inbox before the spawn tool reports success.
                self.client
                    .send_letter(&spawned.child, Some("task"), task)
                    .await
                    .map_err(outlet_error)?;
            }
            Ok(spawned.child)
        })
    }
}
