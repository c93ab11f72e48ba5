import { Kind, parse, type OperationDefinitionNode } from "graphql";
import { describe, expect, it } from "vitest";
import { rootFieldNames } from "../../../src/graphql/root-fields.js";

const namesOf = (source: string) => {
  const document = parse(source);
  const operation = document.definitions.find((d): d is OperationDefinitionNode => d.kind === Kind.OPERATION_DEFINITION);
  if (!operation) throw new Error("no operation in the document");
  return rootFieldNames(operation, document).sort();
};

describe("root fields of an operation", () => {
  it("when mutations are aliased, then each alias counts, and the same response key twice counts once", () => {
    expect(namesOf(`mutation { a: likePost(postId: "1") { changed } b: likePost(postId: "2") { changed } likePost(postId: "3") { changed } }`)).toEqual([
      "likePost",
      "likePost",
      "likePost",
    ]);
    expect(namesOf(`mutation { a: likePost(postId: "1") { changed } a: likePost(postId: "1") { post { id } } }`)).toEqual(["likePost"]);
  });

  it("when fields come through fragments, then they count, and __typename does not", () => {
    const source = `
      mutation { __typename ...Both ... on Mutation { c: login(username: "u", password: "p") { token } } }
      fragment Both on Mutation { a: likePost(postId: "1") { changed } ...Inner }
      fragment Inner on Mutation { register(username: "u", email: "e", password: "p") { token } }`;
    expect(namesOf(source)).toEqual(["likePost", "login", "register"]);
  });
});
