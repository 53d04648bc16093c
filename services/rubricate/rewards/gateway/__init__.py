"""`POST /get_reward` on the gateway: the route (`routes`), one reward per sample by kind
(`service`) and stagewise groups gathered across requests and replicas (`assembly`). Gateway
contract: no model backend, no SQLAlchemy, no other capability; `common`, `core`, the client."""
