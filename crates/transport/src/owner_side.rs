//! Where a connection's messages are handled, seen from the core that holds its socket.

use std::rc::Rc;

use hearth_owner::outbound::ConnHandle;

/// Where the connection's messages are handled.
pub(crate) enum OwnerSide {
    /// This core owns the connection's database: its session is here.
    Local(Rc<ConnHandle>),
    /// Another core owns it: whole messages are sent there.
    Remote(usize),
}
