from iclr26_core.errors import UserError


def hello(args):
    if args.name == "bad":
        raise UserError("the name 'bad' is not allowed")
    print(f"hello {args.name}")
