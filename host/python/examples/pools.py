"""Pre-warmed sandboxes, shared by threads; none is ever handed to two sessions."""

from concurrent.futures import ThreadPoolExecutor

import sandlot
from sandlot.llm_sandbox import SandboxSession
from sandlot.llm_sandbox.pool import PoolConfig, create_pool_manager


def native() -> None:
    with sandlot.Sandlot(pools={"docker": {"min_idle": 2, "max_size": 4}}) as host:

        def task(n: int) -> str:
            with host.session("python", backend="docker") as session:
                return session.run(f'print("Task {n}")').stdout.strip()

        with ThreadPoolExecutor(max_workers=8) as executor:
            print(list(executor.map(task, range(8))))
        print("idle:", host.pool_stats("docker")["idle"])


def llm_sandbox_api() -> None:
    pool = create_pool_manager(backend="docker", config=PoolConfig(max_pool_size=4, min_pool_size=2), lang="python")
    try:

        def run_code(task_id: int) -> str:
            with SandboxSession(lang="python", pool=pool) as session:
                return session.run(f'print("Task {task_id}")').stdout.strip()

        with ThreadPoolExecutor(max_workers=8) as executor:
            print(list(executor.map(run_code, range(8))))
        stats = pool.get_stats()
        print(f"Total containers: {stats['total_size']}, idle: {stats['state_counts']['idle']}")
    finally:
        pool.close()


if __name__ == "__main__":
    native()
    llm_sandbox_api()
