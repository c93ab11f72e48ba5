import { GraphQLError, GraphQLScalarType, Kind } from "graphql";
import { ApolloServerErrorCode } from "@apollo/server/errors";

function parseDate(value: unknown): Date {
  const date = typeof value === "string" ? new Date(value) : new Date(Number.NaN);
  if (Number.isNaN(date.getTime())) {
    throw new GraphQLError("DateTime must be an ISO 8601 string such as 2026-11-22T09:54:25.000Z.", {
      extensions: { code: ApolloServerErrorCode.BAD_USER_INPUT },
    });
  }
  return date;
}

export const DateTime = new GraphQLScalarType<Date, string>({
  name: "DateTime",
  description: "An ISO 8601 date-time in UTC, such as 2026-11-22T09:54:25.000Z.",
  serialize: (value) => (value instanceof Date ? value.toISOString() : parseDate(value).toISOString()),
  parseValue: parseDate,
  parseLiteral: (ast) => parseDate(ast.kind === Kind.STRING ? ast.value : undefined),
});
